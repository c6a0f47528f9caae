package tlsconfig

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PrincipalMapper is Kafka's ssl.principal.mapping.rules
// (SslPrincipalMapper): a comma-separated list of rules, each DEFAULT (the
// distinguished name as it is) or RULE:pattern/replacement/[L|U]; the first
// rule whose pattern matches the whole distinguished name gives the
// principal's name, its replacement applied as Java's String.replaceAll
// applies it, lower- or upper-cased by L or U. A name no rule matches has
// no principal (the connection is refused).
//
// Patterns are Go regular expressions (RE2): Java's syntax but for
// back-references, look-around and possessive quantifiers, which are
// refused when the rules are parsed.
type PrincipalMapper struct {
	rules []principalRule
}

// The rule grammar, Kafka's RULE_PATTERN: DEFAULT, or RULE: then a pattern
// and a replacement, each of escaped characters or characters other than a
// backslash or a slash, each ended by a slash, then an optional L or U; or
// anything else (which parsing refuses, but splitting must step over).
const rulePattern = `(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)`

var (
	ruleSplitter = regexp.MustCompile(`\s*(` + rulePattern + `)\s*(,\s*|$)`)
	ruleParser   = regexp.MustCompile(`^(?:` + rulePattern + `)`)
	backRef      = regexp.MustCompile(`\$(\d+)`)
)

type principalRule struct {
	isDefault   bool
	pattern     *regexp.Regexp // as written
	whole       *regexp.Regexp // the pattern matching the whole name
	replacement string
	lower       bool
	upper       bool
}

// ParsePrincipalMappingRules parses ssl.principal.mapping.rules; empty
// rules are ignored, as in Kafka ("" maps nothing, "DEFAULT" keeps every
// name).
func ParsePrincipalMappingRules(rules string) (*PrincipalMapper, error) {
	var parts []string
	for _, m := range ruleSplitter.FindAllStringSubmatch(strings.TrimSpace(rules), -1) {
		parts = append(parts, m[1])
	}
	pm := &PrincipalMapper{}
	for _, rule := range parts {
		m := ruleParser.FindStringSubmatchIndex(rule)
		if m == nil {
			return nil, fmt.Errorf("invalid rule: %s", rule)
		}
		if m[1] != len(rule) {
			return nil, fmt.Errorf("invalid rule: `%s`, unmatched substring: `%s`", rule, rule[m[1]:])
		}
		group := func(i int) (string, bool) {
			if m[2*i] < 0 {
				return "", false
			}
			return rule[m[2*i]:m[2*i+1]], true
		}
		if _, ok := group(1); ok {
			pm.rules = append(pm.rules, principalRule{isDefault: true})
			continue
		}
		pat, ok := group(2)
		if !ok {
			continue // an empty rule
		}
		repl, _ := group(4)
		lu, _ := group(6)
		re, err := regexp.Compile(pat)
		if err != nil {
			return nil, fmt.Errorf("rule %s: pattern %q: %w", rule, pat, err)
		}
		whole, err := regexp.Compile(`\A(?:` + pat + `)\z`)
		if err != nil {
			return nil, fmt.Errorf("rule %s: pattern %q: %w", rule, pat, err)
		}
		pm.rules = append(pm.rules, principalRule{pattern: re, whole: whole, replacement: repl, lower: lu == "L", upper: lu == "U"})
	}
	return pm, nil
}

// Name maps a distinguished name (RFC 2253, as the certificate's subject
// is written) to a principal name.
func (pm *PrincipalMapper) Name(dn string) (string, error) {
	for _, r := range pm.rules {
		name, ok, err := r.apply(dn)
		if err != nil {
			return "", fmt.Errorf("rule %s on %q: %w", r, dn, err)
		}
		if ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("no rules apply to %s, rules %s", dn, pm.ruleList())
}

// String is Kafka's SslPrincipalMapper.toString.
func (pm *PrincipalMapper) String() string {
	return "SslPrincipalMapper(rules = " + pm.ruleList() + ")"
}

func (pm *PrincipalMapper) ruleList() string {
	s := make([]string, len(pm.rules))
	for i, r := range pm.rules {
		s[i] = r.String()
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func (r principalRule) String() string {
	if r.isDefault {
		return "DEFAULT"
	}
	var b strings.Builder
	b.WriteString("RULE:")
	b.WriteString(r.pattern.String())
	b.WriteString("/")
	b.WriteString(r.replacement)
	if r.lower {
		b.WriteString("/L")
	} else if r.upper {
		b.WriteString("/U")
	}
	return b.String()
}

func (r principalRule) apply(dn string) (string, bool, error) {
	if r.isDefault {
		return dn, true, nil
	}
	if !r.whole.MatchString(dn) {
		return "", false, nil
	}
	groups := r.pattern.NumSubexp()
	repl := escapeLiteralBackReferences(r.replacement, groups)
	out, err := r.replaceAll(dn, repl)
	if err != nil {
		return "", false, err
	}
	if r.lower {
		out = strings.ToLower(out)
	} else if r.upper {
		out = strings.ToUpper(out)
	}
	return out, true, nil
}

// replaceAll is Java's String.replaceAll: every match, left to right, and
// unlike Go's ReplaceAll also an empty match right where a match ended
// (Java's "abc".replaceAll("(.*)", "x-$1") is "x-abcx-").
func (r principalRule) replaceAll(s, repl string) (string, error) {
	var b strings.Builder
	last := 0
	emit := func(m []int) error {
		b.WriteString(s[last:m[0]])
		if err := expandJava(&b, r.pattern, repl, s, m); err != nil {
			return err
		}
		last = m[1]
		return nil
	}
	matches := r.pattern.FindAllStringSubmatchIndex(s, -1)
	for i, m := range matches {
		if err := emit(m); err != nil {
			return "", err
		}
		if m[1] > m[0] && (i+1 == len(matches) || matches[i+1][0] != m[1]) {
			if e := r.emptyMatchAt(s, m[1]); e != nil {
				if err := emit(e); err != nil {
					return "", err
				}
			}
		}
	}
	b.WriteString(s[last:])
	return b.String(), nil
}

// emptyMatchAt returns the pattern's preferred match starting at byte
// offset at (anchors and word boundaries see the text before it) when that
// match is empty, else nil. Go's FindAll skips such a match; Java's does
// not.
func (r principalRule) emptyMatchAt(s string, at int) []int {
	n := utf8.RuneCountInString(s[:at])
	if n > 1000 { // RE2's repeat limit; names this long map as Go's ReplaceAll would
		return nil
	}
	re, err := regexp.Compile(`\A(?s:.{` + strconv.Itoa(n) + `})(?:` + r.pattern.String() + `)`)
	if err != nil {
		return nil
	}
	m := re.FindStringSubmatchIndex(s)
	if m == nil || m[1] != at {
		return nil
	}
	m[0] = at
	return m
}

// expandJava appends Java's Matcher replacement for match m: \x is x,
// $n the longest group number the pattern has, ${name} a named group.
func expandJava(b *strings.Builder, re *regexp.Regexp, repl, s string, m []int) error {
	groups := re.NumSubexp()
	group := func(i int) {
		if m[2*i] >= 0 {
			b.WriteString(s[m[2*i]:m[2*i+1]])
		}
	}
	for i := 0; i < len(repl); {
		c := repl[i]
		switch c {
		case '\\':
			i++
			if i == len(repl) {
				return errors.New("character to be escaped is missing")
			}
			_, size := utf8.DecodeRuneInString(repl[i:])
			b.WriteString(repl[i : i+size])
			i += size
		case '$':
			i++
			if i == len(repl) {
				return errors.New("illegal group reference: group index is missing")
			}
			if repl[i] == '{' {
				end := strings.IndexByte(repl[i:], '}')
				if end < 0 {
					return errors.New("named capturing group is missing trailing '}'")
				}
				name := repl[i+1 : i+end]
				idx := re.SubexpIndex(name)
				if name == "" || idx < 0 {
					return fmt.Errorf("no group with name {%s}", name)
				}
				group(idx)
				i += end + 1
				continue
			}
			if repl[i] < '0' || repl[i] > '9' {
				return errors.New("illegal group reference")
			}
			ref := int(repl[i] - '0')
			i++
			for i < len(repl) && repl[i] >= '0' && repl[i] <= '9' {
				next := ref*10 + int(repl[i]-'0')
				if next > groups {
					break
				}
				ref = next
				i++
			}
			if ref > groups {
				return fmt.Errorf("no group %d", ref)
			}
			group(ref)
		default:
			b.WriteByte(c)
			i++
		}
	}
	return nil
}

// escapeLiteralBackReferences is Kafka's (taken there from Apache NiFi): a
// $n naming a group the pattern does not have is shortened digit by digit
// to one it has, and failing that becomes the literal text "$n". Like
// Kafka's, it indexes the replacement as written while inserting into the
// copy.
func escapeLiteralBackReferences(unescaped string, groups int) string {
	if groups == 0 {
		return unescaped
	}
	value := unescaped
	for _, m := range backRef.FindAllStringSubmatchIndex(unescaped, -1) {
		num := unescaped[m[2]:m[3]]
		if strings.HasPrefix(num, "0") {
			continue
		}
		idx, err := strconv.Atoi(num)
		if err != nil {
			idx = int(^uint(0) >> 1)
		}
		for idx > groups && idx >= 10 {
			idx /= 10
		}
		if idx > groups {
			start := m[2]
			value = value[:start-1] + `\` + value[start-1:]
		}
	}
	return value
}

// SubjectName is a certificate subject in RFC 2253 form (most specific
// attribute first), as Java's X500Principal.getName() gives it.
func SubjectName(raw []byte) string {
	var seq pkix.RDNSequence
	if _, err := asn1.Unmarshal(raw, &seq); err != nil {
		return ""
	}
	return seq.String()
}
