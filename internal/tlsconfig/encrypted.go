package tlsconfig

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
)

// decryptKey returns the DER of a private key block, decrypting it with
// password when it is encrypted: PKCS#8 PBES2 (PBKDF2 with HMAC-SHA1,
// -SHA256 or -SHA512, AES-CBC), which is what Kafka's PEM key stores take
// and what `openssl pkcs8 -topk8 -v2 aes256` writes, or OpenSSL's legacy
// "Proc-Type: 4,ENCRYPTED" headers.
func decryptKey(b *pem.Block, password string) ([]byte, error) {
	//lint:ignore SA1019 legacy encrypted PEM is still what some tools write
	if x509.IsEncryptedPEMBlock(b) { //nolint:staticcheck
		if password == "" {
			return nil, errors.New("the private key is encrypted: set ssl.key.password")
		}
		der, err := x509.DecryptPEMBlock(b, []byte(password)) //nolint:staticcheck
		if err != nil {
			return nil, fmt.Errorf("decrypting the private key: %w", err)
		}
		return der, nil
	}
	if b.Type != "ENCRYPTED PRIVATE KEY" {
		return b.Bytes, nil
	}
	if password == "" {
		return nil, errors.New("the private key is encrypted: set ssl.key.password")
	}
	return decryptPKCS8(b.Bytes, password)
}

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

type algorithmIdentifier struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type encryptedPrivateKeyInfo struct {
	Algorithm     algorithmIdentifier
	EncryptedData []byte
}

type pbes2Params struct {
	KeyDerivationFunc algorithmIdentifier
	EncryptionScheme  algorithmIdentifier
}

type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	KeyLength  int                 `asn1:"optional"`
	PRF        algorithmIdentifier `asn1:"optional"`
}

// maxPBKDF2Iterations bounds the work a key file can ask for.
const maxPBKDF2Iterations = 10_000_000

func decryptPKCS8(der []byte, password string) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if _, err := asn1.Unmarshal(der, &info); err != nil {
		return nil, fmt.Errorf("encrypted private key: %w", err)
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encrypted private key: scheme %v is not PBES2 (re-encrypt it with openssl pkcs8 -topk8 -v2 aes256)", info.Algorithm.Algorithm)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &params); err != nil {
		return nil, fmt.Errorf("encrypted private key: PBES2 parameters: %w", err)
	}
	if !params.KeyDerivationFunc.Algorithm.Equal(oidPBKDF2) {
		return nil, errors.New("encrypted private key: key derivation is not PBKDF2")
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KeyDerivationFunc.Parameters.FullBytes, &kdf); err != nil {
		return nil, fmt.Errorf("encrypted private key: PBKDF2 parameters: %w", err)
	}
	if kdf.Iterations < 1 || kdf.Iterations > maxPBKDF2Iterations {
		return nil, fmt.Errorf("encrypted private key: %d PBKDF2 iterations", kdf.Iterations)
	}
	var prf func() hash.Hash
	switch a := kdf.PRF.Algorithm; {
	case len(a) == 0 || a.Equal(oidHMACSHA1):
		prf = sha1.New
	case a.Equal(oidHMACSHA256):
		prf = sha256.New
	case a.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("encrypted private key: PBKDF2 PRF %v not supported", a)
	}
	var keyLen int
	switch a := params.EncryptionScheme.Algorithm; {
	case a.Equal(oidAES128CBC):
		keyLen = 16
	case a.Equal(oidAES192CBC):
		keyLen = 24
	case a.Equal(oidAES256CBC):
		keyLen = 32
	default:
		return nil, fmt.Errorf("encrypted private key: cipher %v not supported (AES-CBC only)", a)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.EncryptionScheme.Parameters.FullBytes, &iv); err != nil || len(iv) != aes.BlockSize {
		return nil, errors.New("encrypted private key: bad AES IV")
	}
	key, err := pbkdf2.Key(prf, password, kdf.Salt, kdf.Iterations, keyLen)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	data := info.EncryptedData
	if len(data) == 0 || len(data)%aes.BlockSize != 0 {
		return nil, errors.New("encrypted private key: bad length")
	}
	out := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, data)
	pad := int(out[len(out)-1])
	if pad == 0 || pad > aes.BlockSize {
		return nil, errors.New("encrypted private key: wrong ssl.key.password")
	}
	for _, p := range out[len(out)-pad:] {
		if int(p) != pad {
			return nil, errors.New("encrypted private key: wrong ssl.key.password")
		}
	}
	out = out[:len(out)-pad]
	if _, err := x509.ParsePKCS8PrivateKey(out); err != nil {
		return nil, errors.New("encrypted private key: wrong ssl.key.password")
	}
	return out, nil
}
