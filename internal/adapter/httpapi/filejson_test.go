package httpapi

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/gen/api"
)

// The hand-written file encoder must write, byte for byte, what the
// generated responses write with encoding/json: every field of
// api.UploadedFile (filled by reflection, so a field the schema adds
// fails here until appendUploadedFile writes it), set or nil, and every
// string encoding/json escapes.

var trickyStrings = []string{
	"", "plain.csv", `quo"te`, `back\slash`, "tab\there", "new\nline", "cr\rx", "bell\a", "nul\x00", "bs\bff\f",
	"\x1f\x7f", "<script>&amp;</script>", "http://127.0.0.1/x?token=a.b.c&expires=1&sig=%2F",
	"résumé.pdf", "日本語.txt", "bad\xffutf8", "line\u2028sep\u2029", "emoji 😀", "\u00e9<&>",
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range trickyStrings {
		checkString(t, s)
	}
	for c := range 256 {
		checkString(t, "a"+string([]byte{byte(c)})+"z")
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Fuzz(checkString)
}

func checkString(t *testing.T, s string) {
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := appendString([]byte("x"), s); string(got) != "x"+string(want) {
		t.Fatalf("appendString(%q) = %s, encoding/json %s", s, got[1:], want)
	}
}

func TestFileJSONMatchesGeneratedResponses(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		f := randomFile(t, rng, i%3 != 0)
		compareResponses(t, f, "detail", api.GetFile200JSONResponse(f).VisitGetFileResponse,
			fileJSON{status: http.StatusOK, file: f}.VisitGetFileResponse)
		compareResponses(t, f, "upload", api.UploadFile201JSONResponse{Body: f, Headers: api.UploadFile201ResponseHeaders{Location: fileLocation(f.Id)}}.VisitUploadFileResponse,
			fileJSON{status: http.StatusCreated, file: f, location: fileLocation(f.Id)}.VisitUploadFileResponse)
		compareResponses(t, f, "complete", api.CompleteUpload200JSONResponse(f).VisitCompleteUploadResponse,
			fileJSON{status: http.StatusOK, file: f}.VisitCompleteUploadResponse)
	}
}

func TestFileListJSONMatchesGeneratedResponse(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 60 {
		var list api.FileList
		switch i % 4 {
		case 0: // nil items
		case 1:
			list.Items = []api.UploadedFile{}
		default:
			for range rng.IntN(60) {
				list.Items = append(list.Items, randomFile(t, rng, rng.IntN(2) == 0))
			}
		}
		if i%3 == 0 {
			c := trickyStrings[rng.IntN(len(trickyStrings))]
			list.NextCursor = &c
		}
		want, got := httptest.NewRecorder(), httptest.NewRecorder()
		if err := api.ListFiles200JSONResponse(list).VisitListFilesResponse(want); err != nil {
			t.Fatal(err)
		}
		if err := (fileListJSON{list: list}).VisitListFilesResponse(got); err != nil {
			t.Fatal(err)
		}
		if got.Code != want.Code || got.Body.String() != want.Body.String() || !reflect.DeepEqual(got.Header(), want.Header()) {
			t.Fatalf("list %d:\n generated %d %v %s\n ours      %d %v %s", i, want.Code, want.Header(), want.Body, got.Code, got.Header(), got.Body)
		}
	}
}

// A time encoding/json refuses fails the response as the generated one
// does: an error, nothing written.
func TestFileJSONRefusesWhatEncodingJSONRefuses(t *testing.T) {
	f := randomFile(t, rand.New(rand.NewPCG(3, 4)), true)
	bad := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	f.UrlExpiredAt = &bad
	want := httptest.NewRecorder()
	wantErr := api.GetFile200JSONResponse(f).VisitGetFileResponse(want)
	got := httptest.NewRecorder()
	err := fileJSON{status: http.StatusOK, file: f}.VisitGetFileResponse(got)
	if wantErr == nil || err == nil || got.Body.Len() != 0 || got.Code != want.Code || len(got.Header()) != 0 {
		t.Fatalf("generated: %v; ours: %v, %d bytes, headers %v", wantErr, err, got.Body.Len(), got.Header())
	}
	list := api.FileList{Items: []api.UploadedFile{randomFile(t, rand.New(rand.NewPCG(7, 8)), false), f}}
	got = httptest.NewRecorder()
	if err := (fileListJSON{list: list}).VisitListFilesResponse(got); err == nil || got.Body.Len() != 0 || len(got.Header()) != 0 {
		t.Fatalf("list: %v, %d bytes, headers %v", err, got.Body.Len(), got.Header())
	}
}

func compareResponses(t *testing.T, f api.UploadedFile, what string, generated, ours func(http.ResponseWriter) error) {
	t.Helper()
	want, got := httptest.NewRecorder(), httptest.NewRecorder()
	if err := generated(want); err != nil {
		t.Fatal(err)
	}
	if err := ours(got); err != nil {
		t.Fatal(err)
	}
	if got.Code != want.Code || got.Body.String() != want.Body.String() || !reflect.DeepEqual(got.Header(), want.Header()) {
		t.Fatalf("%s of %+v:\n generated %d %v %s\n ours      %d %v %s", what, f, want.Code, want.Header(), want.Body, got.Code, got.Header(), got.Body)
	}
}

// randomFile fills every field of an api.UploadedFile with random values
// (every optional field set when full, each left nil half the time
// otherwise).
func randomFile(t *testing.T, rng *rand.Rand, full bool) api.UploadedFile {
	t.Helper()
	var f api.UploadedFile
	v := reflect.ValueOf(&f).Elem()
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+30*60), time.FixedZone("y", -8*3600)}
	str := func() string {
		if rng.IntN(4) == 0 {
			return trickyStrings[rng.IntN(len(trickyStrings))]
		}
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(0x20 + rng.IntN(0x5f))
		}
		return string(b)
	}
	tm := func() time.Time {
		return time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)*int64(rng.IntN(2))).In(zones[rng.IntN(len(zones))])
	}
	for i := range v.NumField() {
		field, sf := v.Field(i), v.Type().Field(i)
		target := field
		if field.Kind() == reflect.Pointer {
			if !full && rng.IntN(2) == 0 {
				continue
			}
			field.Set(reflect.New(field.Type().Elem()))
			target = field.Elem()
		}
		switch {
		case target.Type() == reflect.TypeOf(time.Time{}):
			target.Set(reflect.ValueOf(tm()))
		case target.Type() == reflect.TypeOf(uuid.UUID{}):
			target.Set(reflect.ValueOf(uuid.New()))
		case target.Kind() == reflect.String:
			target.SetString(str())
		case target.Kind() == reflect.Bool:
			target.SetBool(rng.IntN(2) == 0)
		case target.Kind() == reflect.Int64:
			target.SetInt(rng.Int64() - rng.Int64())
		case target.Kind() == reflect.Int:
			target.SetInt(int64(rng.IntN(1 << 20)))
		default:
			t.Fatalf("api.UploadedFile.%s (%s): not filled here, and appendUploadedFile may not write it", sf.Name, sf.Type)
		}
	}
	return f
}
