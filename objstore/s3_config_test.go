package objstore

import "testing"

func TestOpenS3Config(t *testing.T) {
	for _, cfg := range []S3Config{
		{Bucket: "b"},
		{Endpoint: "127.0.0.1:1"},
		{Endpoint: "127.0.0.1:1", Bucket: "b", Prefix: "no-slash"},
		{Endpoint: "127.0.0.1:1", Bucket: "b", Prefix: "/abs/"},
		{Endpoint: "127.0.0.1:1", Bucket: "b", Prefix: ".hidden/"},
	} {
		if _, err := OpenS3(cfg); err == nil {
			t.Errorf("OpenS3(%+v) accepted", cfg)
		}
	}
	if _, err := OpenS3(S3Config{Endpoint: "127.0.0.1:1", Bucket: "b", Prefix: "cluster-a/"}); err != nil {
		t.Errorf("OpenS3 with prefix cluster-a/: %v", err)
	}
}
