package migrations

import (
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	createTable = regexp.MustCompile(`(?i)^CREATE TABLE (?:IF NOT EXISTS )?(\w+)`)
	createIndex = regexp.MustCompile(`(?i)^CREATE (?:UNIQUE )?INDEX (CONCURRENTLY )?(IF NOT EXISTS )?\w+ ON (\w+)`)
	dropIndex   = regexp.MustCompile(`(?i)^DROP INDEX (CONCURRENTLY )?(IF EXISTS )?\w+`)
	alterTable  = regexp.MustCompile(`(?i)ALTER TABLE (\w+)\s+([^;]*)`)
	clause      = regexp.MustCompile(`(?im)^\s*(ADD|DROP|ALTER|VALIDATE|SET|RENAME)\b`)
	addCheck    = regexp.MustCompile(`(?i)^ADD CONSTRAINT (\w+)`)
	validate    = regexp.MustCompile(`(?i)VALIDATE CONSTRAINT (\w+)`)
	references  = regexp.MustCompile(`(?i)REFERENCES (\w+)`)
	lockTimeout = regexp.MustCompile(`(?i)^SET LOCAL lock_timeout = '\d+s'$`)
)

// TestMigrationsDoNotBlockWrites: every up migration after the first (which
// creates the table) changes tables that already hold rows only in ways
// that let their writers go on -- indexes built CONCURRENTLY (IF NOT
// EXISTS, alone in their migration, since CONCURRENTLY cannot run in a
// transaction block), indexes dropped likewise, constraints added NOT VALID
// (or over an index already built) and validated by a later migration --
// and a migration that takes a lock writers wait on (ALTER TABLE, a foreign
// key to such a table) bounds its wait with SET LOCAL lock_timeout first,
// so it never queues the writers behind a long transaction.
func TestMigrationsDoNotBlockWrites(t *testing.T) {
	names, err := fs.Glob(Files, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	existing := map[string]bool{}
	notValid := map[string]string{} // constraint -> migration that added it NOT VALID
	for n, name := range names {
		body, err := fs.ReadFile(Files, name)
		if err != nil {
			t.Fatal(err)
		}
		stmts := statements(string(body))
		created := map[string]bool{}
		for _, s := range stmts {
			if m := createTable.FindStringSubmatch(s); m != nil {
				created[m[1]] = true
			}
		}
		fail := func(format string, args ...any) {
			t.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
		}
		locks := false
		for _, s := range stmts {
			if m := createIndex.FindStringSubmatch(s); m != nil && existing[m[3]] {
				if m[1] == "" || m[2] == "" || len(stmts) != 1 {
					fail("an index on %s, which holds rows, is built CONCURRENTLY IF NOT EXISTS, alone in its migration: %q", m[3], s)
				}
			}
			if m := dropIndex.FindStringSubmatch(s); m != nil && n > 0 {
				if m[1] == "" || m[2] == "" || len(stmts) != 1 {
					fail("an index is dropped CONCURRENTLY IF EXISTS, alone in its migration: %q", s)
				}
			}
			for _, m := range references.FindAllStringSubmatch(s, -1) {
				if existing[m[1]] && !created[m[1]] {
					locks = true
				}
			}
			for _, m := range alterTable.FindAllStringSubmatch(s, -1) {
				if !existing[m[1]] || created[m[1]] {
					continue
				}
				idx := clause.FindAllStringIndex(m[2], -1)
				for i, at := range idx {
					end := len(m[2])
					if i+1 < len(idx) {
						end = idx[i+1][0]
					}
					c := strings.TrimSpace(m[2][at[0]:end])
					if v := validate.FindStringSubmatch(c); v != nil {
						delete(notValid, v[1])
						continue
					}
					locks = true
					if a := addCheck.FindStringSubmatch(c); a != nil {
						switch {
						case strings.Contains(strings.ToUpper(c), "USING INDEX"):
						case strings.Contains(strings.ToUpper(c), "NOT VALID"):
							notValid[a[1]] = name
						default:
							fail("constraint %s on %s, which holds rows, is added NOT VALID and validated by a later migration", a[1], m[1])
						}
					}
				}
			}
		}
		if locks && n > 0 && !lockTimeout.MatchString(stmts[0]) {
			fail("it takes a lock writers wait on: its first statement is SET LOCAL lock_timeout = '<n>s'")
		}
		for table := range created {
			existing[table] = true
		}
	}
	for c, name := range notValid {
		t.Errorf("%s: constraint %s is added NOT VALID and never validated", name, c)
	}
}

// TestStatements: the splitter the lint reads migrations with.
func TestStatements(t *testing.T) {
	got := statements("-- a; comment\nCREATE FUNCTION f() AS $$ BEGIN; END $$;\nALTER TABLE t ADD x; -- trailing\n\nSELECT 1")
	want := []string{"CREATE FUNCTION f() AS $$ BEGIN; END $$", "ALTER TABLE t ADD x", "SELECT 1"}
	if !slices.Equal(got, want) {
		t.Fatalf("statements = %q, want %q", got, want)
	}
}

// windowStart is the migration that created the schema window.
const windowStart = 20261128100001

// TestMigrationsDeclareTheirWindow: every migration from the schema
// window's on records the oldest binary that runs on the schema it leaves
// (its row in uploaded_file_schema_compat), never above itself, and never
// below the floor before it: a floor once raised by a contract stays.
func TestMigrationsDeclareTheirWindow(t *testing.T) {
	floor := uint(0)
	for _, v := range versions() {
		if v < windowStart {
			continue
		}
		oldest := declaredOldest(v)
		if oldest == 0 {
			t.Errorf("migration %d declares no oldest binary: end it with INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES (%d, <the floor before it, or %d for a contract>)", v, v, v)
			continue
		}
		if oldest > v || oldest < floor {
			t.Errorf("migration %d declares oldest binary %d: want between the floor before it (%d) and itself", v, oldest, floor)
		}
		floor = oldest
	}
	if floor == 0 {
		t.Fatal("no migration declares the window")
	}
}
