package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// instruments are the three things a component reports through, by the
// type that carries each and the one name a field of that type has.
var instruments = map[string]string{
	"*slog.Logger":          "Logger",
	"prometheus.Registerer": "Registerer",
	"trace.TracerProvider":  "TracerProvider",
}

// instrumentParams are the exported functions that take an instrument as
// a parameter, each for a reason: the public service's options (a Go host
// passes them one by one) and the store wrappers whose whole purpose is
// the instrument they are given (and the SQL tracer built from one).
var instrumentParams = map[string]bool{
	"tracing.NewPGX":             true,
	"service.WithLogger":         true,
	"service.WithMetrics":        true,
	"service.WithTracerProvider": true,
	"storagemetrics.Wrap":        true,
	"storagetrace.Wrap":          true,
	"storeopen.Instrument":       true,
}

// TestOneWayToObserve: a component is given its logger, metrics registry
// and tracer provider one way -- as fields named Logger, Registerer and
// TracerProvider of the value it is built from (its options or config) --
// never as a positional parameter or through a setter, but where
// instrumentParams says why.
func TestOneWayToObserve(t *testing.T) {
	checked := 0
	for _, f := range goFiles(t) {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "gen/") || strings.Contains(f, "node_modules/") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join("../..", f), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		if file.Name.Name == "main" {
			continue // cmd assembles: its own functions pass what it built
		}
		checked++
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.StructType:
				for _, field := range n.Fields.List {
					want, ok := instruments[typeName(field.Type)]
					for _, name := range field.Names {
						if ok && name.IsExported() && name.Name != want {
							t.Errorf("%s: field %s holds a %s: name it %s", f, name.Name, typeName(field.Type), want)
						}
					}
				}
			case *ast.FuncDecl:
				if !n.Name.IsExported() || instrumentParams[file.Name.Name+"."+n.Name.Name] {
					return true
				}
				for _, p := range n.Type.Params.List {
					if want, ok := instruments[typeName(p.Type)]; ok {
						t.Errorf("%s: %s takes a %s as a parameter: make it an options field named %s", f, n.Name.Name, typeName(p.Type), want)
					}
				}
			}
			return true
		})
	}
	require.Greater(t, checked, 100, "git listed the module's Go files")
}

// typeName is a type expression as written: *slog.Logger, trace.TracerProvider.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "*" + typeName(e.X)
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			return x.Name + "." + e.Sel.Name
		}
	}
	return ""
}
