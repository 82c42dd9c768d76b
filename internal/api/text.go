package api

import (
	"fmt"
	"reflect"
	"strings"
)

// MaxTextBytes caps every string a request body carries (names, reasons,
// projects, flow specs, a transfer's source and destination...): the
// longest path Linux takes (PATH_MAX), so a transfer's source fits, and
// far more than any reason or name needs. Only fields tagged
// `text:"long"` (a topology file) are exempt; the body's own bound holds
// them.
const MaxTextBytes = 4096

// checkText refuses a decoded request whose strings (in fields, lists and
// maps, keys included, at any depth) are over MaxTextBytes, naming the
// field: "reason", "path[3]", "bytes_by_path".
func checkText(v any) error {
	return checkTextValue(reflect.ValueOf(v), "")
}

func checkTextValue(v reflect.Value, field string) error {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return checkTextValue(v.Elem(), field)
	case reflect.String:
		if n := v.Len(); n > MaxTextBytes {
			name := field
			if name == "" {
				name = "the body"
			}
			return invalid(field, "%s is %d bytes, over the %d a text field may hold", name, n, MaxTextBytes)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // raw bytes (json.RawMessage), not text
		}
		for i := range v.Len() {
			if err := checkTextValue(v.Index(i), fmt.Sprintf("%s[%d]", field, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if err := checkTextValue(it.Key(), field); err != nil {
				return err
			}
			if err := checkTextValue(it.Value(), field); err != nil {
				return err
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("text") == "long" {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if f.Anonymous {
				name = field
			} else if field != "" {
				name = field + "." + name
			}
			if err := checkTextValue(v.Field(i), name); err != nil {
				return err
			}
		}
	}
	return nil
}
