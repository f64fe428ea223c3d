package client_test

import (
	"github.com/google/uuid"
	"context"
	"fmt"
	"net/http"

	"github.com/uploadedfile/uploadedfile/gen/client"
)

// The client sends no token of its own: a request editor adds the
// caller's bearer token to every request (the token is a JWT the service
// verifies; docs/configuration.md, "Tokens", says which claims it reads).
func Example_token() {
	token := "eyJ..." // the caller's token, from your identity provider
	c, err := client.NewClientWithResponses("https://files.example.com",
		client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
	if err != nil {
		panic(err)
	}
	res, err := c.GetFileWithResponse(context.Background(), uuid.MustParse("0192f0c4-6a1e-7c3d-9b2a-5e8f7a6b4c3d"))
	if err != nil {
		panic(err)
	}
	if res.JSON200 != nil {
		fmt.Println(res.JSON200.OriginalName, res.JSON200.Status)
	}
}
