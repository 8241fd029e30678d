package chaos

import (
	"context"
	"os/exec"
)

// execCommand runs a command and returns its combined output.
func execCommand(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}
