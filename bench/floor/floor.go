// Package floor holds the handlers of the bench's floors that more than
// one measurement runs: the raw baseline's lookup and download (bench) and
// the in-process download floor (internal/httpapi's benchmarks), so both
// measure the same code.
package floor

import (
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"
)

// BareSelect is the bare SELECT by key every lookup floor runs.
const BareSelect = "SELECT key FROM uploaded_file WHERE key = $1"

// key runs BareSelect for the request's key query parameter; false: a 404
// was sent.
func key(pool *pgxpool.Pool, w http.ResponseWriter, r *http.Request) (string, bool) {
	var k string
	if err := pool.QueryRow(r.Context(), BareSelect, r.URL.Query().Get("key")).Scan(&k); err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return "", false
	}
	return k, true
}

// Lookup is the floor of any HTTP lookup: BareSelect behind a minimal
// handler, no token, the key as JSON.
func Lookup(pool *pgxpool.Pool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if k, ok := key(pool, w, r); ok {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"key":%q}`, k)
		}
	}
}

// Download is the floor of a download that checks the database first:
// BareSelect, then the file under files opened by path, fstat and
// http.ServeContent, as http.FileServer serves it.
func Download(pool *pgxpool.Pool, files string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		k, ok := key(pool, w, r)
		if !ok {
			return
		}
		f, err := os.Open(filepath.Join(files, filepath.FromSlash(k)))
		if err != nil {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			http.Error(w, "stat", http.StatusInternalServerError)
			return
		}
		http.ServeContent(w, r, path.Base(k), fi.ModTime(), f)
	}
}
