package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// newVersionCommand prints what the binary was built from: the module
// version, the commit (and whether the tree had changes), the Go version.
func newVersionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the module version, commit and Go version of this binary",
		Example: "  uploadedfile version",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprint(g.stdout, versionText())
			return nil
		},
	}
}

// versionText reads the build information the Go toolchain embeds.
func versionText() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "uploadedfile (no build information)\n"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	commit := settings["vcs.revision"]
	if commit == "" {
		commit = "unknown"
	}
	if settings["vcs.modified"] == "true" {
		commit += " (modified)"
	}
	out := fmt.Sprintf("uploadedfile %s\ncommit: %s\n", info.Main.Version, commit)
	if t := settings["vcs.time"]; t != "" {
		out += "commit time: " + t + "\n"
	}
	return out + "go: " + info.GoVersion + "\n"
}
