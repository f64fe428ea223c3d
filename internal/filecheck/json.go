package filecheck

import (
	"bufio"
	"errors"
	"io"
)

// maxJSONDepth bounds nesting, and with it the validator's recursion.
const maxJSONDepth = 512

// errJSON is the one internal failure of the validator.
var errJSON = errors.New("json")

// checkJSON streams r through a syntax-only JSON validator (RFC 8259):
// exactly one value, surrounded by whitespace only, nested at most
// maxJSONDepth deep. It allocates its read buffer and nothing else, so a
// 25 MiB document costs no more memory than a small one. UTF-8 validity is
// checked separately by checkUTF8.
func checkJSON(r io.Reader) error {
	v := jsonValidator{r: bufio.NewReaderSize(r, 64<<10)}
	if err := v.value(0); err != nil {
		return invalid(RuleContentJSON, "not valid JSON")
	}
	switch _, err := v.skipSpace(); {
	case err == nil:
		return invalid(RuleContentJSON, "more than one JSON value")
	case !errors.Is(err, io.EOF):
		return invalid(RuleContentJSON, "not valid JSON")
	}
	return nil
}

type jsonValidator struct{ r *bufio.Reader }

// skipSpace returns the next byte that is not JSON whitespace.
func (v *jsonValidator) skipSpace() (byte, error) {
	for {
		c, err := v.r.ReadByte()
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
	}
}

func (v *jsonValidator) value(depth int) error {
	c, err := v.skipSpace()
	if err != nil {
		return errJSON
	}
	return v.valueFrom(c, depth)
}

func (v *jsonValidator) valueFrom(c byte, depth int) error {
	switch {
	case c == '{':
		return v.object(depth + 1)
	case c == '[':
		return v.array(depth + 1)
	case c == '"':
		return v.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return v.number(c)
	case c == 't':
		return v.literal("rue")
	case c == 'f':
		return v.literal("alse")
	case c == 'n':
		return v.literal("ull")
	}
	return errJSON
}

func (v *jsonValidator) object(depth int) error {
	if depth > maxJSONDepth {
		return errJSON
	}
	c, err := v.skipSpace()
	if err != nil {
		return errJSON
	}
	if c == '}' {
		return nil
	}
	for {
		if c != '"' || v.str() != nil {
			return errJSON
		}
		if c, err = v.skipSpace(); err != nil || c != ':' {
			return errJSON
		}
		if err := v.value(depth); err != nil {
			return err
		}
		if c, err = v.skipSpace(); err != nil {
			return errJSON
		}
		switch c {
		case '}':
			return nil
		case ',':
			if c, err = v.skipSpace(); err != nil {
				return errJSON
			}
		default:
			return errJSON
		}
	}
}

func (v *jsonValidator) array(depth int) error {
	if depth > maxJSONDepth {
		return errJSON
	}
	c, err := v.skipSpace()
	if err != nil {
		return errJSON
	}
	if c == ']' {
		return nil
	}
	for {
		if err := v.valueFrom(c, depth); err != nil {
			return err
		}
		if c, err = v.skipSpace(); err != nil {
			return errJSON
		}
		switch c {
		case ']':
			return nil
		case ',':
			if c, err = v.skipSpace(); err != nil {
				return errJSON
			}
		default:
			return errJSON
		}
	}
}

// str reads the rest of a string after its opening quote.
func (v *jsonValidator) str() error {
	for {
		c, err := v.r.ReadByte()
		switch {
		case err != nil || c < 0x20:
			return errJSON
		case c == '"':
			return nil
		case c == '\\':
			if err := v.escape(); err != nil {
				return err
			}
		}
	}
}

func (v *jsonValidator) escape() error {
	c, err := v.r.ReadByte()
	if err != nil {
		return errJSON
	}
	switch c {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return nil
	case 'u':
		for range 4 {
			h, err := v.r.ReadByte()
			if err != nil || !isHex(h) {
				return errJSON
			}
		}
		return nil
	}
	return errJSON
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number reads a number whose first byte is c: -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?
func (v *jsonValidator) number(c byte) error {
	if c == '-' {
		var err error
		if c, err = v.r.ReadByte(); err != nil {
			return errJSON
		}
	}
	switch {
	case c == '0':
	case c >= '1' && c <= '9':
		v.digits()
	default:
		return errJSON
	}
	next, err := v.r.ReadByte()
	if err != nil {
		return nil // a number may end the document
	}
	if next == '.' {
		if n := v.digits(); n == 0 {
			return errJSON
		}
		if next, err = v.r.ReadByte(); err != nil {
			return nil
		}
	}
	if next == 'e' || next == 'E' {
		sign, err := v.r.ReadByte()
		if err != nil {
			return errJSON
		}
		if sign != '+' && sign != '-' {
			_ = v.r.UnreadByte()
		}
		if n := v.digits(); n == 0 {
			return errJSON
		}
		return nil
	}
	_ = v.r.UnreadByte()
	return nil
}

// digits consumes [0-9]* and returns how many.
func (v *jsonValidator) digits() int {
	n := 0
	for {
		c, err := v.r.ReadByte()
		if err != nil {
			return n
		}
		if c < '0' || c > '9' {
			_ = v.r.UnreadByte()
			return n
		}
		n++
	}
}

func (v *jsonValidator) literal(rest string) error {
	for i := 0; i < len(rest); i++ {
		c, err := v.r.ReadByte()
		if err != nil || c != rest[i] {
			return errJSON
		}
	}
	return nil
}
