// Package pgurl adapts PostgreSQL connection URLs.
package pgurl

import (
	"net/url"
	"strings"
)

// SingleConn is databaseURL for one connection (pgx.Connect, the
// migrator): without the pool_* parameters, which configure pgxpool and
// which PostgreSQL would refuse as settings ("unrecognized configuration
// parameter"). A URL that does not parse is returned as it is, for the
// connection to report.
func SingleConn(databaseURL string) string {
	u, err := url.Parse(databaseURL)
	if err != nil || u.RawQuery == "" {
		return databaseURL
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
