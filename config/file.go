package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// loadFile reads the YAML config file at path into l's Config. The file is
// parsed by yaml.v3 into its node tree, which is walked against the
// settings: a key that is not a setting or a section is refused, and each
// value is applied in the order of the table, so that every error names
// the key and the line.
func (l *loader) loadFile(path string) error {
	l.path = path
	if err := checkConfigFileMode(path); err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return &Error{msg: fmt.Sprintf("config %s: cannot read: %v", path, pe.Err), err: err}
		}
		return &Error{msg: fmt.Sprintf("config %s: cannot read: %v", path, err), err: err}
	}
	root, err := l.parse(data)
	if err != nil || root == nil {
		return err
	}
	nodes := map[string]*yaml.Node{}
	if errs := l.collect(root, "", nodes); len(errs) > 0 {
		e := errs[0]
		if more := len(errs) - 1; more > 0 {
			e.msg += fmt.Sprintf(" (and %d more)", more)
		}
		return e
	}
	for i := range l.table {
		if n := nodes[l.table[i].key]; n != nil {
			if err := l.apply(&l.table[i], resolve(n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// parse parses the file's one YAML document and returns its top mapping,
// or nil when the file sets nothing (empty, comments only, or null).
func (l *loader) parse(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, &Error{msg: "config " + l.path + ": " + strings.TrimPrefix(err.Error(), "yaml: "), err: err}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, &Error{msg: "config " + l.path + ": " + strings.TrimPrefix(err.Error(), "yaml: "), err: err}
		}
		return nil, &Error{msg: fmt.Sprintf("config %s: line %d: a second YAML document; the file must hold one", l.path, extra.Line)}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := resolve(doc.Content[0])
	switch {
	case root.Tag == "!!null":
		return nil, nil
	case root.Kind != yaml.MappingNode:
		return nil, &Error{msg: fmt.Sprintf("config %s: line %d: the file must be a mapping of keys to values", l.path, root.Line)}
	}
	return root, nil
}

// collect gathers the values of mapping n, the section named prefix ("" for
// the top of the file, else ending in "."), into nodes by key. It returns
// every key that is not a setting, every repeated key and every section
// that is not a mapping, as errors naming the key and its line. Merge keys
// (<<: *anchor) are followed; the mapping's own keys override what they
// bring.
func (l *loader) collect(n *yaml.Node, prefix string, nodes map[string]*yaml.Node) []*Error {
	var errs []*Error
	seen := map[string]int{} // key -> its line
	for _, merges := range []bool{true, false} {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
			switch isMerge := k.Tag == "!!merge"; {
			case isMerge != merges:
				continue
			case isMerge:
				errs = append(errs, l.merge(v, prefix, nodes)...)
				continue
			}
			if line, dup := seen[k.Value]; dup {
				errs = append(errs, l.fileError(prefix+k.Value, "line %d: mapping key %q already defined at line %d", k.Line, k.Value, line))
				continue
			}
			seen[k.Value] = k.Line
			errs = append(errs, l.collectValue(k, v, prefix, nodes)...)
		}
	}
	return errs
}

// collectValue gathers the value v of key node k in the section prefix.
func (l *loader) collectValue(k, v *yaml.Node, prefix string, nodes map[string]*yaml.Node) []*Error {
	key := prefix + k.Value
	if l.setting(key) != nil {
		nodes[key] = v
		return nil
	}
	sub := l.sectionKeys(key)
	switch {
	case len(sub) > 0 && v.Tag == "!!null":
		return nil // an empty section sets nothing
	case len(sub) > 0 && v.Kind != yaml.MappingNode:
		return []*Error{l.fileError(key, "line %d: %s: must be a mapping with %s", v.Line, key, strings.Join(sub, ", "))}
	case len(sub) > 0:
		return l.collect(v, key+".", nodes)
	case prefix == "":
		return []*Error{l.fileError(key, "line %d: field %s not found", k.Line, key)}
	}
	section := strings.TrimSuffix(prefix, ".")
	return []*Error{l.fileError(key, "line %d: field %s not found (%s takes %s)", k.Line, key, section, strings.Join(l.sectionKeys(section), ", "))}
}

// merge gathers the mappings that a merge key brings in: one, or a list.
func (l *loader) merge(v *yaml.Node, prefix string, nodes map[string]*yaml.Node) []*Error {
	list := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		list = v.Content
	}
	var errs []*Error
	for _, m := range list {
		if m = resolve(m); m.Kind != yaml.MappingNode {
			errs = append(errs, l.fileError("", "line %d: a merge (<<) takes a mapping or a list of mappings", m.Line))
			continue
		}
		errs = append(errs, l.collect(m, prefix, nodes)...)
	}
	return errs
}

// apply applies node n (aliases resolved) of the file to setting s. A
// null value keeps the default.
func (l *loader) apply(s *setting, n *yaml.Node) error {
	if n.Kind == 0 || n.Tag == "!!null" {
		return nil
	}
	where := fmt.Sprintf("config %s: line %d: %s", l.path, n.Line, s.key)
	var err error
	nv, isNodeValue := s.val.(nodeValue)
	switch {
	case n.Kind == yaml.ScalarNode:
		err = s.val.set(n.Value)
	case isNodeValue:
		err = nv.setNode(n)
	default:
		err = errors.New("must be a single value, not a " + kindName(n))
	}
	var ne *nodeError
	switch {
	case errors.As(err, &ne):
		return &Error{Key: s.key, msg: fmt.Sprintf("config %s: line %d: %s: %s", l.path, ne.n.Line, s.key, ne.msg)}
	case err != nil:
		return &Error{Key: s.key, msg: where + ": " + err.Error()}
	}
	l.src[s.key] = where
	return nil
}

// fileError returns an error about key in the file: "config FILE: " and
// the message.
func (l *loader) fileError(key, format string, args ...any) *Error {
	return &Error{Key: key, msg: "config " + l.path + ": " + fmt.Sprintf(format, args...)}
}
