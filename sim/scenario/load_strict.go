package scenario

import (
	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/internal/yamlnode"
)

// problem is one thing wrong with a scenario file: its line (0 when
// unknown), the dotted path of the value (when known and not in msg) and
// what is wrong.
type problem struct {
	line int
	path string
	msg  string
}

// maxNodes bounds the nodes of a file once its aliases are expanded.
const maxNodes = yamlnode.MaxNodes

// copyTree returns a deep copy of an expanded tree.
func copyTree(n *yaml.Node) *yaml.Node {
	budget := 2 * maxNodes
	c, err := yamlnode.Expand(n, &budget)
	if err != nil {
		panic("scenario: copyTree of a tree that was not expanded: " + err.Error())
	}
	return c
}
