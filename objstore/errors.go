package objstore

import "errors"

var (
	// ErrNotFound: no object has the key (Get, GetRange, Stat).
	ErrNotFound = errors.New("objstore: object not found")
	// ErrExists: PutIfAbsent found an object under the key.
	ErrExists = errors.New("objstore: object already exists")
	// ErrInvalidRange: a GetRange offset outside the object, or a
	// negative offset or non-positive length.
	ErrInvalidRange = errors.New("objstore: invalid range")
	// ErrInvalidKey: a key or prefix that breaks the key rule (ValidKey).
	ErrInvalidKey = errors.New("objstore: invalid key")
	// ErrUnsupported: the backend, as configured, cannot do this
	// (PutIfAbsent without conditional writes).
	ErrUnsupported = errors.New("objstore: not supported by this store")
)
