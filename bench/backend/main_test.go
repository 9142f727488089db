package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestServe(t *testing.T) {
	tests := []struct {
		path string
		code int
		size int
	}{
		{"/1k", 200, 1024},
		{"/1m", 200, 1 << 20},
		{"/size/0", 200, 0},
		{"/size/3000000", 200, 3000000},
		{"/size/-1", 400, -1},
		{"/size/999999999999", 400, -1},
		{"/size/x", 400, -1},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		serve(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
		body, _ := io.ReadAll(rec.Result().Body)
		if rec.Code != tt.code || (tt.size >= 0 && len(body) != tt.size) {
			t.Errorf("%s: %d, %d bytes; want %d, %d", tt.path, rec.Code, len(body), tt.code, tt.size)
		}
	}
}
