#!/usr/bin/env bash
# Install the reference MCP servers the tests run into DIR (no global install):
#   bash plugins/agentcore-mcp/tests/install-servers.sh DIR
#   export AGENTCORE_MCP_NODE_DIR=DIR
# The servers are plain node scripts (bin entries mcp-server-everything, mcp-server-filesystem);
# once installed they fetch nothing at run time. Versions are pinned so results are reproducible.
set -euo pipefail
dir="${1:?usage: install-servers.sh DIR}"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "install-servers.sh: node/npm not found; the MCP reference-server tests will skip" >&2
    exit 0
fi
mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name": "agentcore-mcp-test-servers", "private": true}' > package.json
npm install --no-audit --no-fund --save-exact --loglevel=error \
    @modelcontextprotocol/server-everything@2026.8.31 \
    @modelcontextprotocol/server-filesystem@2026.8.31
test -x node_modules/.bin/mcp-server-everything
test -x node_modules/.bin/mcp-server-filesystem
echo "install-servers.sh: MCP reference servers installed in $dir"
