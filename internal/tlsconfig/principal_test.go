package tlsconfig

import (
	"fmt"
	"strings"
	"testing"
)

// The cases of Kafka's SslPrincipalMapperTest, one for one.

func TestPrincipalMappingValidRules(t *testing.T) {
	for _, rules := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
		"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
	} {
		if _, err := ParsePrincipalMappingRules(rules); err != nil {
			t.Errorf("%q: %v", rules, err)
		}
	}
}

func TestPrincipalMappingInvalidRules(t *testing.T) {
	for _, rules := range []string{
		"default",
		"DEFAUL",
		"DEFAULT/L",
		"DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
		// Not Kafka's case: a pattern RE2 cannot run is refused when parsed.
		`RULE:^CN=(a)\1$/$1/`,
	} {
		if pm, err := ParsePrincipalMappingRules(rules); err == nil {
			t.Errorf("%q parsed as %s, want an error", rules, pm)
		}
	}
}

func TestPrincipalMapper(t *testing.T) {
	pm, err := ParsePrincipalMappingRules(strings.Join([]string{
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
		"DEFAULT",
	}, ", "))
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		got, err := pm.Name(dn)
		if err != nil || got != want {
			t.Errorf("Name(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}
}

func TestPrincipalMappingRulesSplitting(t *testing.T) {
	for _, c := range []struct{ want, rules string }{
		{"[]", ""},
		{"[DEFAULT]", "DEFAULT"},
		{"[RULE:/]", "RULE://"},
		{"[RULE:/.*]", "RULE:/.*/"},
		{"[RULE:/.*/L]", "RULE:/.*/L"},
		{"[RULE:/, DEFAULT]", "RULE://,DEFAULT"},
		{"[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "},
		{"[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "},
		{"[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "},
		{"[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "},
		// empty rules are ignored
		{"[]", ",   , , ,      , , ,   "},
		{"[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"},
		{"[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "},
		{"[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"},
		// escape sequences
		{`[RULE:\/\\\(\)\n\t/\/\/]`, `RULE:\/\\\(\)\n\t/\/\//`},
		{`[RULE:\**\/+/*/L, RULE:\/*\**/**]`, `RULE:\**\/+/*/L,RULE:\/*\**/**/`},
		// rules rule
		{`[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]`,
			`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`},
	} {
		pm, err := ParsePrincipalMappingRules(c.rules)
		if err != nil {
			t.Errorf("%q: %v", c.rules, err)
			continue
		}
		if got, want := pm.String(), fmt.Sprintf("SslPrincipalMapper(rules = %s)", c.want); got != want {
			t.Errorf("%q: got %s, want %s", c.rules, got, want)
		}
	}
}

func TestPrincipalMappingCommaWithWhitespace(t *testing.T) {
	pm, err := ParsePrincipalMappingRules(`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pm.Name(`CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`); err != nil || got != `Tkac\, Adam` {
		t.Fatalf("got %q, %v", got, err)
	}
}

// Java's replacement semantics, which Kafka's rules inherit (not cases of
// Kafka's test; the expected values are what java.lang.String.replaceAll
// returns).
func TestPrincipalMappingJavaReplacement(t *testing.T) {
	for _, c := range []struct{ rules, dn, want string }{
		// an empty match right after the whole-name match is replaced too
		{"RULE:(.*)/x-$1/", "CN=a", "x-CN=ax-"},
		// $12 with one group is group 1 then a literal 2 (Java's digit rule)
		{"RULE:^CN=(.*)$/$12/", "CN=a", "a2"},
		// $4 with three groups: Kafka escapes it to a literal
		{"RULE:^CN=(.*),OU=(.*),O=(.*)$/$1@$4/", "CN=a,OU=b,O=c", "a@$4"},
		// \/ is a slash in the pattern and in the replacement
		{`RULE:^CN=([^,]*)\/x.*$/$1\/y/`, "CN=a/x,O=b", "a/y"},
		// a named group
		{"RULE:^CN=(?P<who>[^,]*).*$/${who}/U", "CN=bob,O=x", "BOB"},
	} {
		pm, err := ParsePrincipalMappingRules(c.rules)
		if err != nil {
			t.Errorf("%q: %v", c.rules, err)
			continue
		}
		if got, err := pm.Name(c.dn); err != nil || got != c.want {
			t.Errorf("%q on %q: got %q, %v; want %q", c.rules, c.dn, got, err, c.want)
		}
	}
	pm, _ := ParsePrincipalMappingRules("RULE:^CN=admin$/root/")
	if got, err := pm.Name("CN=alice"); err == nil {
		t.Errorf("a name no rule matches mapped to %q", got)
	}
}
