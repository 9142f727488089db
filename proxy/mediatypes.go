package proxy

import (
	"fmt"
	"mime"
	"strings"
)

// The media types of files, by extension. The files route's own table, not
// the host's (/etc/mime.types, which Go's mime package reads and which
// differs between distributions and is absent from minimal images): the
// same file gets the same Content-Type on every machine the proxy runs on,
// as nginx's shipped mime.types gives it. FilesConfig.Types adds to it or
// overrides it (nginx's types).
//
// JavaScript is text/javascript (RFC 9239 §6), certificates and CRLs the
// RFC 2585 §4 types an SM2 CA's distribution point serves, OFD (GB/T
// 33190) documents application/ofd.
var builtinMediaTypes = map[string]string{
	// Pages, scripts, styles and data.
	".html": "text/html", ".htm": "text/html", ".shtml": "text/html",
	".xhtml": "application/xhtml+xml",
	".css":   "text/css",
	".js":    "text/javascript", ".mjs": "text/javascript",
	".json": "application/json", ".map": "application/json",
	".jsonld":      "application/ld+json",
	".webmanifest": "application/manifest+json",
	".xml":         "text/xml", ".xsl": "text/xml",
	".rss":  "application/rss+xml",
	".atom": "application/atom+xml",
	".txt":  "text/plain", ".text": "text/plain",
	".csv":  "text/csv",
	".md":   "text/markdown",
	".ics":  "text/calendar",
	".vtt":  "text/vtt",
	".yaml": "application/yaml", ".yml": "application/yaml",
	".wasm": "application/wasm",
	// Images.
	".png": "image/png", ".apng": "image/apng",
	".jpg": "image/jpeg", ".jpeg": "image/jpeg",
	".gif":  "image/gif",
	".webp": "image/webp",
	".avif": "image/avif",
	".svg":  "image/svg+xml", ".svgz": "image/svg+xml",
	".ico": "image/x-icon",
	".bmp": "image/bmp",
	".tif": "image/tiff", ".tiff": "image/tiff",
	// Fonts (RFC 8081).
	".woff": "font/woff", ".woff2": "font/woff2",
	".ttf": "font/ttf", ".otf": "font/otf",
	".eot": "application/vnd.ms-fontobject",
	// Audio and video.
	".mp3": "audio/mpeg",
	".ogg": "audio/ogg", ".oga": "audio/ogg", ".opus": "audio/ogg",
	".wav":  "audio/wav",
	".m4a":  "audio/mp4",
	".aac":  "audio/aac",
	".flac": "audio/flac",
	".mp4":  "video/mp4", ".m4v": "video/mp4",
	".webm": "video/webm",
	".ogv":  "video/ogg",
	".mov":  "video/quicktime",
	".ts":   "video/mp2t",
	".m3u8": "application/vnd.apple.mpegurl",
	".mpd":  "application/dash+xml",
	// Documents and archives.
	".pdf":  "application/pdf",
	".ofd":  "application/ofd",
	".doc":  "application/msword",
	".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	".xls":  "application/vnd.ms-excel",
	".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	".ppt":  "application/vnd.ms-powerpoint",
	".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
	".zip":  "application/zip",
	".gz":   "application/gzip",
	".tar":  "application/x-tar",
	".7z":   "application/x-7z-compressed",
	".rar":  "application/vnd.rar",
	".apk":  "application/vnd.android.package-archive",
	// Certificates and revocation lists (RFC 2585 §4.1, §4.2).
	".cer": "application/pkix-cert", ".crt": "application/pkix-cert", ".der": "application/pkix-cert",
	".crl": "application/pkix-crl",
}

// mediaTypeOf is the media type of a file with extension ext ("" when
// neither table knows it): types (the route's own, keys as
// normaliseExtension makes them) before the built-in table.
func mediaTypeOf(types map[string]string, ext string) string {
	ext = strings.ToLower(ext)
	if t, ok := types[ext]; ok {
		return t
	}
	return builtinMediaTypes[ext]
}

// CheckMediaType reports what is wrong with a FilesConfig.Types entry:
// ext is a file name extension (".wasm" or "wasm"), mt a media type
// (type/subtype, parameters allowed).
func CheckMediaType(ext, mt string) error {
	e := strings.TrimPrefix(ext, ".")
	if e == "" || strings.ContainsAny(e, "./\\ \t") {
		return fmt.Errorf("%q is not a file name extension", ext)
	}
	t, _, err := mime.ParseMediaType(mt)
	if err != nil || !strings.Contains(t, "/") {
		return fmt.Errorf("%q is not a media type (type/subtype)", mt)
	}
	return nil
}

// normaliseExtension is ext as mediaTypeOf looks it up: lower case, with
// its dot.
func normaliseExtension(ext string) string {
	return "." + strings.ToLower(strings.TrimPrefix(ext, "."))
}
