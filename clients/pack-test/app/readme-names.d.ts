// What the README snippets the pack test compiles (snippets/, extracted
// from the packages' READMEs) take from the page around them: a reader's
// own token source, file input, progress bar and message line.
declare function getToken(): string;
declare const input: HTMLInputElement;
declare const bar: { update(fraction: number): void };
declare function show(message: string, retryable: boolean): void;
declare const id: string;
