package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestLogTailKeepsTheLastProblems(t *testing.T) {
	var logs logTails
	quiet := logs.add("quiet")
	fmt.Fprintln(quiet, `{"level":"INFO","msg":"listening"}`)
	noisy := logs.add("uploadedfile")
	for i := range 6000 {
		fmt.Fprintf(noisy, `{"level":"INFO","msg":"request","n":%d}`+"\n", i)
		if i%100 == 0 {
			fmt.Fprintf(noisy, `{"level":"ERROR","msg":"write object","n":%d}`+"\n", i)
		}
	}
	fmt.Fprintln(noisy, `{"level":"WARN","msg":"slow"}`)
	fmt.Fprintln(noisy, "panic: boom")

	if len(noisy.buf) > 2*tailBytes {
		t.Fatalf("tail holds %d bytes, more than %d", len(noisy.buf), 2*tailBytes)
	}
	got := logs.report(3)
	want := "\nuploadedfile (server 2 of 2 started) logged:" +
		"\n  " + `{"level":"ERROR","msg":"write object","n":5900}` +
		"\n  " + `{"level":"WARN","msg":"slow"}` +
		"\n  panic: boom"
	if got != want {
		t.Fatalf("report:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(got, "quiet") {
		t.Fatal("a server with nothing to report is listed")
	}
}

func TestLogTailReportsNothingWithoutProblems(t *testing.T) {
	var logs logTails
	fmt.Fprintln(logs.add("uploadedfile"), `{"level":"INFO","msg":"listening"}`)
	if got := logs.report(5); got != "" {
		t.Fatalf("report = %q, want none", got)
	}
}
