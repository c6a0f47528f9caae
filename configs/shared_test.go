package configs

import (
	"strings"
	"testing"
)

// TestSharedStorageConfigValidate: the broker refuses incomplete shared
// storage settings and a shared default without shared storage.
func TestSharedStorageConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"dir without path":   {func(c *Config) { c.SharedStorageType = "dir" }, "shared.storage.dir"},
		"s3 without bucket":  {func(c *Config) { c.SharedStorageType, c.SharedS3Endpoint = "s3", "127.0.0.1:8333" }, "shared.storage.s3.bucket"},
		"unknown type":       {func(c *Config) { c.SharedStorageType = "nfs" }, "not dir or s3"},
		"shared default":     {func(c *Config) { c.ReplicationMode = "shared" }, "shared.storage.type"},
		"tiny upload buffer": {func(c *Config) { c.SharedStorageType, c.SharedStorageDir, c.SharedUploadBytes = "dir", "/x", 10 }, "shared.upload.bytes"},
		"no upload slot":     {func(c *Config) { c.SharedStorageType, c.SharedStorageDir, c.SharedUploadParallel = "dir", "/x", 0 }, "shared.upload.parallel"},
		"tiny disk cache":    {func(c *Config) { c.SharedStorageType, c.SharedStorageDir, c.SharedCacheDiskBytes = "dir", "/x", 10 }, "shared.cache.disk.bytes"},
	} {
		c := Default()
		tc.mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error naming %s", name, err, tc.want)
		}
	}
	c := Default()
	c.SharedStorageType, c.SharedStorageDir, c.ReplicationMode = "dir", "/x", "shared"
	if err := c.Validate(); err != nil {
		t.Errorf("dir storage with a shared default: %v", err)
	}
}
