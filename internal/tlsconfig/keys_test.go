package tlsconfig

import (
	"reflect"
	"slices"
	"testing"
)

// TestKeysTable: every field of Keys is in the key table under its
// mapstructure name, and Set fills that field and no other.
func TestKeysTable(t *testing.T) {
	typ := reflect.TypeOf(Keys{})
	var tags []string
	for i := range typ.NumField() {
		tags = append(tags, typ.Field(i).Tag.Get("mapstructure"))
	}
	if !slices.Equal(tags, KeyNames()) {
		t.Fatalf("mapstructure tags %v, key table %v", tags, KeyNames())
	}
	for i, name := range KeyNames() {
		var k Keys
		if !k.Set(name, "v") {
			t.Fatalf("Set(%s) refused", name)
		}
		v := reflect.ValueOf(k)
		for j := range v.NumField() {
			if got, want := v.Field(j).String(), map[bool]string{true: "v"}[i == j]; got != want {
				t.Fatalf("Set(%s): field %s = %q, want %q", name, typ.Field(j).Name, got, want)
			}
		}
	}
	var k Keys
	for _, name := range []string{"ssl.truststore.password", "ssl.endpoint.identification.algorithm", "sasl.mechanism", ""} {
		if k.Set(name, "v") || k != (Keys{}) {
			t.Fatalf("Set(%q) took a key Keys does not have", name)
		}
	}
}

func TestKeysOptions(t *testing.T) {
	k := Keys{SSLKeystoreType: "PEM", SSLKeystoreLocation: "/k.pem", SSLKeyPassword: "kp", SSLTruststoreLocation: "/ca.crt",
		SSLClientAuth: "required", SSLEnabledProtocols: " TLSv1.2, ,TLSv1.3", SSLCipherSuites: ""}
	want := Options{KeystoreType: "PEM", KeystoreLocation: "/k.pem", KeyPassword: "kp", TruststoreLocation: "/ca.crt",
		ClientAuth: "required", EnabledProtocols: []string{"TLSv1.2", "TLSv1.3"}}
	if got := k.Options(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Options() = %+v, want %+v", got, want)
	}
}
