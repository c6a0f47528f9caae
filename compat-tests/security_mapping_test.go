package compat

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// TestSecurePrincipalMapping: ssl.principal.mapping.rules on an SSL
// listener with client certificates. kcat presents a certificate whose
// subject is CN=Orders-App,OU=Services,O=Example; the listener's rule maps
// it to User:orders-app, and the ACLs granted to User:orders-app (not to
// the subject) let kcat produce and read back. A certificate of another
// OU falls through to DEFAULT and keeps its subject as its name, which no
// ACL names: TOPIC_AUTHORIZATION_FAILED. A listener whose rules map no
// name at all (no DEFAULT) refuses the connection, as Kafka does.
func TestSecurePrincipalMapping(t *testing.T) {
	t.Parallel()
	requireTool(t, "kcat")
	pki := newSecPKI(t)
	mtls, strict := harness.FreeAddr(t), harness.FreeAddr(t)
	b := harness.Start(t, harness.Options{
		Listeners: func(kafka string) string { return "SASL_SSL://" + kafka + ",SSL://" + mtls + ",STRICT://" + strict },
		ExtraArgs: []string{
			"--set", "listener.security.protocol.map=SASL_SSL:SASL_SSL,SSL:SSL,STRICT:SSL",
			"--set", "ssl.keystore.location=" + pki.Server,
			"--set", "sasl.enabled.mechanisms=SCRAM-SHA-512",
			"--set", "listener.name.ssl.ssl.client.auth=required",
			"--set", "listener.name.strict.ssl.client.auth=required",
			"--set", "ssl.truststore.location=" + pki.CA,
			"--set", `listener.name.ssl.ssl.principal.mapping.rules=RULE:^CN=([^,]*),OU=Services,O=Example$/$1/L, DEFAULT`,
			"--set", `listener.name.strict.ssl.principal.mapping.rules=RULE:^CN=([^,]*),OU=Services,O=Example$/$1/L`,
			"--set", "authorizer.class.name=" + standardAz,
		},
		Env: []string{"SLUICE_BOOTSTRAP_USER=" + secMatrixUser + ":" + secMatrixPass},
	})
	sb := &secMatrixBroker{Broker: b, MTLSAddr: mtls, pki: pki}
	const topic = "mapped-orders"
	sb.createTopic(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(sb.franz(t, secScram))
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:orders-app").Topics(topic).
		Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("CreateACLs %v: %v", r.Operation, r.Err)
		}
	}

	kcatArgs := func(addr string, subject pkix.Name) []string {
		cert, key := pki.issueClient(subject)
		return []string{"-b", addr, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + pki.CA,
			"-X", "ssl.certificate.location=" + cert, "-X", "ssl.key.location=" + key,
			"-X", "topic.request.required.acks=all", "-X", "message.send.max.retries=0"}
	}
	orders := pkix.Name{CommonName: "Orders-App", OrganizationalUnit: []string{"Services"}, Organization: []string{"Example"}}
	var in strings.Builder
	for i := range secRecords {
		fmt.Fprintf(&in, "v%d\n", i)
	}
	common := kcatArgs(mtls, orders)
	if err := runBounded(60*time.Second, in.String(), "kcat", append(common, "-P", "-t", topic)...); err != nil {
		t.Fatalf("kcat as CN=Orders-App,OU=Services,O=Example (mapped to User:orders-app, which has WRITE): %v", err)
	}
	out, err := runOutput(60*time.Second, "kcat", append(common, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%s\n")...)
	if err == nil {
		err = valuesOK(strings.Fields(out), secRecords)
	}
	if err != nil {
		t.Fatalf("kcat as User:orders-app reading back: %v", err)
	}

	// Another OU: DEFAULT keeps the subject, which has no ACL.
	other := pkix.Name{CommonName: "Orders-App", OrganizationalUnit: []string{"Contractors"}, Organization: []string{"Example"}}
	err = runBounded(60*time.Second, "x\n", "kcat", append(kcatArgs(mtls, other), "-P", "-t", topic)...)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "topic authorization failed") {
		t.Fatalf("kcat as CN=Orders-App,OU=Contractors,O=Example (User:CN=Orders-App,OU=Contractors,O=Example, no ACL): %v; want Topic authorization failed", err)
	}

	// The STRICT listener has no DEFAULT: the mapped subject gets in, the
	// other is refused at connection.
	if err := runBounded(60*time.Second, "strict\n", "kcat", append(kcatArgs(strict, orders), "-P", "-t", topic)...); err != nil {
		t.Fatalf("kcat as CN=Orders-App,OU=Services,O=Example on the listener without DEFAULT: %v", err)
	}
	if out, err := runOutput(20*time.Second, "kcat", append(kcatArgs(strict, other), "-L", "-m", "5")...); err == nil {
		t.Fatalf("kcat with a subject no rule maps was served metadata:\n%s", tail(out, 500))
	}
}
