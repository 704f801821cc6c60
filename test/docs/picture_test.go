package docs

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's pictures are the tool's own: SVGs kustodian-ctl drew (make
// demo writes them; docs/images has copies), not drawings made by hand.
func TestTheReadmesPicturesAreTheToolsOwn(t *testing.T) {
	top := root(t)
	readme, err := os.ReadFile(filepath.Join(top, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	pics := regexp.MustCompile(`!\[[^\]]*\]\((docs/images/[^)]+\.svg)\)`).FindAllSubmatch(readme, -1)
	if len(pics) == 0 {
		t.Fatal("README.md shows no picture of docs/images/*.svg")
	}
	for _, m := range pics {
		path := string(m[1])
		b, err := os.ReadFile(filepath.Join(top, path))
		if err != nil {
			t.Fatalf("README.md shows %s: %v", path, err)
		}
		var doc struct {
			XMLName xml.Name
			Class   string `xml:"class,attr"`
			Title   string `xml:"title"`
		}
		if err := xml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: not an SVG: %v", path, err)
		}
		if doc.XMLName.Local != "svg" || doc.Class != "timeline" || !strings.HasPrefix(doc.Title, "Kustodian: ") || !strings.Contains(string(b), `data-node="`) {
			t.Errorf("%s is not a timeline kustodian-ctl drew (root %s, class %q, title %q)", path, doc.XMLName.Local, doc.Class, doc.Title)
		}
	}
}
