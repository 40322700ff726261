package serverrecord

import (
	"strconv"
	"unicode/utf8"
)

// appendJSON encodes e as encoding/json would (the same keys, empty
// fields left out), without reflection: a busy run's record has tens of
// thousands of events a second, and encoding/json was most of the
// observer's CPU.
func appendJSON(b []byte, e *Event) []byte {
	b = append(b, `{"t":`...)
	b = strconv.AppendInt(b, e.T, 10)
	b = appendField(b, "node", e.Node)
	b = appendField(b, "kind", e.Kind)
	b = appendField(b, "key", e.Key)
	b = appendField(b, "token", e.Token)
	b = appendField(b, "token_unread", e.TokenUnread)
	if e.End != 0 {
		b = append(b, `,"end":`...)
		b = strconv.AppendInt(b, e.End, 10)
	}
	b = appendField(b, "why", e.Why)
	return append(b, '}')
}

// appendField appends ,"name":"value" unless value is empty.
func appendField(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, value)
}

// appendString appends s as a JSON string; bytes that are not UTF-8 are
// written as U+FFFD, as encoding/json does.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
