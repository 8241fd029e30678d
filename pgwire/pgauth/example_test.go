package pgauth_test

import (
	"fmt"

	"github.com/cairn-db/cairn/pgwire/pgauth"
)

func ExampleVerifierWithSalt() {
	v, err := pgauth.VerifierWithSalt("s3cret", []byte("0123456789abcdef"), 4096)
	if err != nil {
		panic(err)
	}
	fmt.Println(v)
	creds, err := pgauth.ParseVerifier(v)
	if err != nil {
		panic(err)
	}
	fmt.Println(creds.Iters, string(creds.Salt))
	// Output:
	// SCRAM-SHA-256$4096:MDEyMzQ1Njc4OWFiY2RlZg==$MiuIWMPE8f1wvUs8gqR/HUOBiaxP2InTIltSNS8murY=:UKlEJeK+9JbWnqN1OJJFASpGl2gC6h5m1W8s9eH3q3Q=
	// 4096 0123456789abcdef
}
