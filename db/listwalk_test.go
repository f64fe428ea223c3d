package db_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
)

// TestWalkRowFileCopiesEveryColumn: a list row's File carries every
// column of the file, so a column added to uploaded_file reaches the lists
// or fails here.
func TestWalkRowFileCopiesEveryColumn(t *testing.T) {
	var row db.FileListOwnerByCreatedFilteredRow
	rv := reflect.ValueOf(&row).Elem()
	for i := range rv.NumField() {
		fill(t, rv.Field(i), rv.Type().Field(i).Name)
	}
	file := reflect.ValueOf(row.File())
	for i := range file.NumField() {
		name := file.Type().Field(i).Name
		require.False(t, file.Field(i).IsZero(), "File() leaves %s out", name)
		require.Equal(t, rv.FieldByName(name).Interface(), file.Field(i).Interface(), name)
	}
}

// fill sets v to a value that is not its type's zero.
func fill(t *testing.T, v reflect.Value, name string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), name)
	case reflect.String:
		v.SetString(name)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(len(name)))
	case reflect.Slice:
		v.Set(reflect.ValueOf([]byte(name)).Convert(v.Type()))
	case reflect.Array:
		for i := range v.Len() {
			v.Index(i).SetUint(uint64(i + 1))
		}
	case reflect.Struct: // time.Time
		v.Set(reflect.ValueOf(t0))
	default:
		t.Fatalf("%s: no sample of kind %s", name, v.Kind())
	}
}
