package jsondec

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unsafe"
)

// kind is how a field (or a slice's element) is stored.
type kind uint8

const (
	kBool kind = iota + 1
	kInt8
	kInt16
	kInt32
	kInt64
	kUint8
	kUint16
	kUint32
	kUint64
	kFloat32
	kFloat64
	kString
)

// size is the bytes one value of k takes in memory.
func (k kind) size() uintptr {
	switch k {
	case kBool, kInt8, kUint8:
		return 1
	case kInt16, kUint16:
		return 2
	case kInt32, kUint32, kFloat32:
		return 4
	case kString:
		return unsafe.Sizeof("")
	}
	return 8
}

// expected is the reason for an Error about a value of the wrong type.
func (k kind) expected() string {
	switch k {
	case kBool:
		return "expected a boolean"
	case kString:
		return "expected a string"
	case kFloat32, kFloat64:
		return "expected a number"
	case kUint8, kUint16, kUint32, kUint64:
		return "expected an unsigned integer"
	}
	return "expected an integer"
}

// field is one member of a Schema: where it lives in the struct and how
// it is stored.
type field struct {
	name   string // the JSON member name, matched exactly
	offset uintptr
	kind   kind
	slice  bool // a slice of kind
}

// Schema is how the members of a JSON object map onto the fields of the
// struct type T. It is built once (NewSchema), read-only afterwards, and
// shared by every worker.
//
// T's exported fields are named as encoding/json names them (the `json`
// tag's name, else the Go field name; "-" skips a field; omitempty is
// accepted and means nothing when decoding) and matched exactly: unlike
// encoding/json, "ID" does not fill a field named "id" (encoding/json/v2
// matches exactly too). A field must be a bool, an integer or unsigned
// integer of any size, a float32 or float64, a string, or a slice of one
// of these; named types with those underlying types are fine unless they
// implement json.Unmarshaler or encoding.TextUnmarshaler, which this
// decoder would ignore. Anything else is refused by NewSchema, naming the
// field, rather than decoded differently from encoding/json.
type Schema[T any] struct {
	fields []field
}

// NewSchema builds the Schema of struct type T.
func NewSchema[T any]() (*Schema[T], error) {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("jsondec: %v is not a struct", t)
	}
	s := &Schema[T]{}
	seen := map[string]string{}
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous {
			// encoding/json promotes the fields of an embedded struct,
			// even an unexported one.
			return nil, fmt.Errorf("jsondec: %v.%s: embedded fields are not supported", t, sf.Name)
		}
		if !sf.IsExported() {
			continue
		}
		name := sf.Name
		if tag, ok := sf.Tag.Lookup("json"); ok {
			n, opts, _ := strings.Cut(tag, ",")
			if n == "-" && opts == "" {
				continue
			}
			if strings.Contains(","+opts+",", ",string,") {
				return nil, fmt.Errorf("jsondec: %v.%s: the ,string option is not supported", t, sf.Name)
			}
			if n != "" && !validTagName(n) {
				// encoding/json would ignore such a name and use the
				// Go name: refuse it rather than differ.
				return nil, fmt.Errorf("jsondec: %v.%s: tag name %q is not valid", t, sf.Name, n)
			}
			if n != "" {
				name = n
			}
		}
		f := field{name: name, offset: sf.Offset}
		ft := sf.Type
		if ft.Kind() == reflect.Slice {
			f.slice = true
			if err := checkMethods(t, sf, ft); err != nil {
				return nil, err
			}
			ft = ft.Elem()
			if ft.Kind() == reflect.Uint8 {
				// encoding/json reads a []byte from a base64 string.
				return nil, fmt.Errorf("jsondec: %v.%s: []byte is not supported (encoding/json reads it as base64)", t, sf.Name)
			}
		}
		if err := checkMethods(t, sf, ft); err != nil {
			return nil, err
		}
		f.kind = kindOf(ft.Kind())
		if f.kind == 0 {
			return nil, fmt.Errorf("jsondec: %v.%s: type %v is not supported", t, sf.Name, sf.Type)
		}
		if other, dup := seen[name]; dup {
			return nil, fmt.Errorf("jsondec: %v: fields %s and %s are both named %q", t, other, sf.Name, name)
		}
		seen[name] = sf.Name
		s.fields = append(s.fields, f)
	}
	return s, nil
}

// MustSchema is NewSchema for package-level variables: it panics on a
// type NewSchema refuses.
func MustSchema[T any]() *Schema[T] {
	s, err := NewSchema[T]()
	if err != nil {
		panic(err)
	}
	return s
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func checkMethods(t reflect.Type, sf reflect.StructField, ft reflect.Type) error {
	p := reflect.PointerTo(ft)
	if p.Implements(unmarshalerType) || p.Implements(textUnmarshalerType) {
		return fmt.Errorf("jsondec: %v.%s: type %v has its own UnmarshalJSON or UnmarshalText, which jsondec would not call", t, sf.Name, ft)
	}
	return nil
}

// validTagName is encoding/json's rule for a tag's name: letters, digits
// and some punctuation.
func validTagName(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c) && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return false
		}
	}
	return true
}

func kindOf(k reflect.Kind) kind {
	switch k {
	case reflect.Bool:
		return kBool
	case reflect.Int8:
		return kInt8
	case reflect.Int16:
		return kInt16
	case reflect.Int32:
		return kInt32
	case reflect.Int64, reflect.Int:
		if k == reflect.Int && unsafe.Sizeof(int(0)) != 8 {
			return kInt32
		}
		return kInt64
	case reflect.Uint8:
		return kUint8
	case reflect.Uint16:
		return kUint16
	case reflect.Uint32:
		return kUint32
	case reflect.Uint64, reflect.Uint:
		if k == reflect.Uint && unsafe.Sizeof(uint(0)) != 8 {
			return kUint32
		}
		return kUint64
	case reflect.Float32:
		return kFloat32
	case reflect.Float64:
		return kFloat64
	case reflect.String:
		return kString
	}
	return 0
}

// Decode decodes data, a JSON object (or null, which changes nothing),
// into *v with d's options and scratch space. The fields of *v that the
// object names are set; the others are left as they are. On an error, *v
// may be partly set.
//
// The strings and slices it stores point into data and into d's scratch
// space: they are valid until data changes or d decodes again (in a
// handler: until it returns). Copy what must outlive that
// (strings.Clone, slices.Clone).
func (s *Schema[T]) Decode(d *Decoder, data []byte, v *T) error {
	return d.decode(data, unsafe.Pointer(v), s.fields)
}
