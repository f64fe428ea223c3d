package httpapi

import (
	"strings"
	"testing"
)

// strictJSON looks a route up only for POST and PATCH: a closed JSON body
// on any other method would go unchecked.
func TestClosedJSONBodiesArePostOrPatch(t *testing.T) {
	for pattern := range jsonBodies {
		if !strings.HasPrefix(pattern, "POST ") && !strings.HasPrefix(pattern, "PATCH ") {
			t.Errorf("%s: strictJSON checks bodies of POST and PATCH only", pattern)
		}
	}
}
