package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/uploadedfile/uploadedfile/internal/imagevariant"
)

// buildCommit is the commit `make build` stamps (-ldflags -X
// main.buildCommit=...): the version's commit when the toolchain embedded
// none (a build outside the repository, or with -buildvcs=false).
var buildCommit string

// newVersionCommand prints what the binary was built from: the module
// version, the commit (and whether the tree had changes), the Go version.
func newVersionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the module version, commit and Go version of this binary",
		Example: "  uploadedfile version",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := readVersion()
			return g.emit(v.text(), v)
		},
	}
}

// version is what the binary was built from.
type version struct {
	Module   string `json:"module"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified,omitempty"`
	Time     string `json:"commitTime,omitempty"`
	Go       string `json:"go"`
	// ImageEngine is the engine variants are made on by default (the
	// config's variants.engine may pick another built in), with its
	// library's version; ImageEngines lists every one built in.
	ImageEngine  string   `json:"imageEngine"`
	ImageEngines []string `json:"imageEngines"`
}

// readVersion reads the build information the Go toolchain embeds, the
// commit of make build's stamp when it embedded none.
func readVersion() version {
	v := version{Module: "(devel)", Commit: buildCommit}
	if info, ok := debug.ReadBuildInfo(); ok {
		v.Module, v.Go = info.Main.Version, info.GoVersion
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			case "vcs.time":
				v.Time = s.Value
			}
		}
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	for i, e := range imagevariant.Engines() {
		if i == 0 {
			v.ImageEngine = imagevariant.Describe(e)
		}
		v.ImageEngines = append(v.ImageEngines, e.Name())
	}
	return v
}

func (v version) text() string {
	commit := v.Commit
	if v.Modified {
		commit += " (modified)"
	}
	out := fmt.Sprintf("uploadedfile %s\ncommit: %s\n", v.Module, commit)
	if v.Time != "" {
		out += "commit time: " + v.Time + "\n"
	}
	out += "go: " + v.Go + "\n"
	return out + "image engine: " + v.ImageEngine + " (built in: " + strings.Join(v.ImageEngines, ", ") + ")\n"
}
