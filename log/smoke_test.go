package log

import "testing"

func TestSmoke(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, testConfig())
	for i := 0; i < 10; i++ {
		r := mustAppend(t, l, mkBatch(spec{n: 3, valueSize: 10}))
		if r.BaseOffset != int64(i*3) || r.LastOffset != int64(i*3+2) {
			t.Fatalf("append %d: %+v", i, r)
		}
	}
	if got := len(readAll(t, l)); got != 10 {
		t.Fatalf("got %d batches", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, testConfig())
	defer l.Close()
	if l.LogEndOffset() != 30 || len(readAll(t, l)) != 10 {
		t.Fatalf("after reopen: leo %d", l.LogEndOffset())
	}
}
