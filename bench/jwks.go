package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// jwksSigner is a key set served on loopback (as an identity provider
// would) with an RSA and an EC key, and the bench's tokens signed by each.
type jwksSigner struct {
	srv   *httptest.Server
	rs256 string // a token signed with the RSA key (kid "rs")
	es256 string // a token signed with the EC key (kid "es")
}

func newJWKSSigner() (*jwksSigner, error) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	var set jwkset.JWKSMarshal
	for kid, pub := range map[string]any{"rs": rsaKey.Public(), "es": ecKey.Public()} {
		alg := jwkset.AlgRS256
		if kid == "es" {
			alg = jwkset.AlgES256
		}
		jwk, err := jwkset.NewJWKFromKey(pub, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: alg, USE: jwkset.UseSig}})
		if err != nil {
			return nil, err
		}
		set.Keys = append(set.Keys, jwk.Marshal())
	}
	body, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	s := &jwksSigner{srv: httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))}
	claims := jwt.MapClaims{"sub": "bench", "tenant": "bench", "exp": time.Now().Add(time.Hour).Unix()}
	sign := func(m jwt.SigningMethod, kid string, key any) (string, error) {
		t := jwt.NewWithClaims(m, claims)
		t.Header["kid"] = kid
		return t.SignedString(key)
	}
	if s.rs256, err = sign(jwt.SigningMethodRS256, "rs", rsaKey); err != nil {
		return nil, err
	}
	if s.es256, err = sign(jwt.SigningMethodES256, "es", ecKey); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *jwksSigner) url() string { return s.srv.URL }
func (s *jwksSigner) stop()       { s.srv.Close() }
