package serverrecord

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The observer speaks RESP3 itself: it needs push messages (keyspace
// notifications) and command replies on one connection, in the order the
// node produced them, which is what makes a token read after a set exact
// (see Observer). go-redis's PubSub hides that order.

// value is one RESP3 reply or push message.
type value struct {
	kind byte // the type byte: '+', '-', ':', '$', '*', '>', '%', '~', '_', ...
	str  string
	num  int64
	arr  []value
	null bool
}

func (v value) isError() bool { return v.kind == '-' || v.kind == '!' }

// appendCommand encodes a command as a RESP array of bulk strings.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// maxBulk bounds a string the observer accepts: a lock's token is short,
// and a node that sends more is not one the observer understands.
const maxBulk = 16 << 20

// readValue reads one RESP3 value. Attributes ('|') are read and dropped.
func readValue(r *bufio.Reader) (value, error) {
	line, err := readLine(r)
	if err != nil {
		return value{}, err
	}
	if len(line) == 0 {
		return value{}, errors.New("resp: empty line")
	}
	v := value{kind: line[0]}
	body := string(line[1:])
	switch v.kind {
	case '+', '-', ',', '(', '#':
		v.str = body
	case ':':
		if v.num, err = strconv.ParseInt(body, 10, 64); err != nil {
			return value{}, fmt.Errorf("resp: integer %q: %w", body, err)
		}
	case '_':
		v.null = true
	case '$', '=', '!':
		n, err := strconv.Atoi(body)
		if err != nil || n > maxBulk {
			return value{}, fmt.Errorf("resp: bulk length %q", body)
		}
		if n < 0 {
			v.null = true
			return v, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return value{}, err
		}
		v.str = string(buf[:n])
	case '*', '>', '~', '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil || n > 1<<20 {
			return value{}, fmt.Errorf("resp: aggregate length %q", body)
		}
		if n < 0 {
			v.null = true
			return v, nil
		}
		if v.kind == '%' || v.kind == '|' {
			n *= 2
		}
		v.arr = make([]value, n)
		for i := range v.arr {
			if v.arr[i], err = readValue(r); err != nil {
				return value{}, err
			}
		}
		if v.kind == '|' { // an attribute precedes the real reply
			return readValue(r)
		}
	default:
		return value{}, fmt.Errorf("resp: unknown type %q", v.kind)
	}
	return v, nil
}

func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("resp: line without CRLF: %q", line)
	}
	return line[:len(line)-2], nil
}
