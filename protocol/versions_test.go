package protocol

import "testing"

func TestVersionTable(t *testing.T) {
	for _, k := range Keys() {
		r, _ := Versions(k)
		if r.Min < 0 || r.Min > r.Max {
			t.Errorf("key %d: bad range %v", k, r)
		}
		if r.Max > KmsgMaxVersion(k) {
			t.Errorf("key %d: advertises v%d, kmsg encodes up to v%d", k, r.Max, KmsgMaxVersion(k))
		}
	}
	// Floors that clients' feature detection depends on.
	for key, min := range map[int16]int16{0: 0, 3: 0, 18: 0} {
		if r, ok := Versions(key); !ok || r.Min != min {
			t.Errorf("key %d must be advertised from v%d, got %v", key, min, r)
		}
	}
	if r, _ := Versions(1); r.Min != 4 {
		t.Errorf("Fetch must start at v4 (v2 record batches), got %v", r)
	}
}
