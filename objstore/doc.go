// Package objstore is Sluice's one interface to shared storage: the layer
// the shared-storage replication mode (docs/shared-storage.md) writes
// partition data into and read brokers read it back from. Nothing in it
// knows about Kafka, partitions or offsets; it stores immutable objects
// under keys.
//
// Two backends implement Store:
//
//   - Dir, a directory on a shared POSIX file system (NFS, CephFS, or a
//     local disk for one machine). A Put writes a temporary file in the
//     object's directory, fsyncs it, renames it over the key and fsyncs the
//     directory, so an object is either absent or complete and durable.
//   - S3, any S3-compatible object store (AWS S3, Ceph RGW, MinIO,
//     SeaweedFS) through the minio-go client. A Put is one PUT request; it
//     returns when the store acknowledged it.
//
// # Contract
//
// Keys are '/'-separated, at most 1024 bytes of [A-Za-z0-9._=-] and '/',
// with no empty segment and no segment that starts with '.' (ValidKey): the
// same rule for both backends, so a key that works on one works on the
// other, and the directory backend can keep its temporary files (".tmp-*")
// out of every key's way.
//
// No key may be a leading segment path of another ("a" and "a/b"): S3
// allows both, a directory cannot be both a file and a directory, so the
// callers' key schemes avoid it and the directory backend refuses it.
//
// Objects are immutable once written: the callers write each key once
// (Put overwrites, so a retried Put of the same bytes is harmless) and
// delete it when no longer referenced. Every method is safe for concurrent
// use and blocks until the storage answered or ctx ended.
//
//   - Put returns nil only once the object is durable: acknowledged by the
//     object store, or fsynced with its directory entry on the file system.
//     After that, Get, GetRange, Stat and List from any client see it.
//   - PutIfAbsent creates the key only if no object has it, atomically
//     with respect to other writers: exactly one of several concurrent
//     creators succeeds and the others get ErrExists. This is the fence the
//     shared mode can use so that two writers never commit the same object
//     name. A backend that cannot do it returns ErrUnsupported
//     (S3Config.ConditionalWrites off); VerifyConditional checks that a
//     store really refuses the second create, since an S3 server that
//     ignores If-None-Match would silently overwrite.
//   - GetRange reads bytes [off, off+n) of an object, fewer if the object
//     ends first; off must be inside the object (ErrInvalidRange
//     otherwise). Read brokers fetch the parts of an object they need with
//     it (ranged GETs).
//   - List calls fn for every key with the prefix, in ascending byte order
//     of the keys (S3's order), and stops at fn's first error.
//   - Delete removes a key; deleting a key that does not exist is not an
//     error, so deletes can be retried.
//
// Errors are the sentinels in errors.go (ErrNotFound, ErrExists,
// ErrInvalidRange, ErrInvalidKey, ErrUnsupported), wrapped with the key;
// test them with errors.Is. Anything else is a storage or transport failure
// that the caller may retry.
//
// # Tests
//
// storetest_test.go is one conformance suite run against both backends: a
// temporary directory, and a real S3 server started by the test (package
// internal/s3test): S3Proxy in `make test` (SLUICE_S3PROXY_JAR names the
// jar make test-setup fetches), SeaweedFS's weed in `make test-s3`
// (SLUICE_WEED names the binary it builds). Without either the S3 tests
// are skipped, and fail instead under CI=true.
package objstore
