#!/usr/bin/env bash
# Install the official MCP conformance suite, the MCP Inspector (its --cli mode: the gateway tests use it
# as a client nobody here wrote) and the Node 22 they need into tests/conformance/node_modules.
#
# Both come from the npm registry, pinned in tests/conformance/package.json (and its lock file):
#   @modelcontextprotocol/conformance 0.1.16   (crashes at load time on Node 20: it imports fs.globSync)
#   conformance-alpha                          (npm alias of @modelcontextprotocol/conformance@0.2.0-alpha.12:
#                                              the 2026-07-28 scenarios, installed beside 0.1.16)
#   @modelcontextprotocol/inspector 2.12.0     (needs Node >= 22.19; its vite is held at 8.3.8 by
#                                              "overrides": vite 8.4 wants a Windows-only optional
#                                              package the registry does not serve, so `npm ci` fails)
#   node 22.23.3                               (the npm package `node`; its preinstall fetches the binary)
# It also installs the suite's reference server (tests/conformance/reference/alpha, vendored, see the
# README there) with `npm ci` from its own lock file, into reference/*/node_modules (git-ignored).
# Idempotent: does nothing when the installed trees match their lock files. Needs `npm` (any Node) on PATH.
# The test suite (tests/conformance/) runs `node_modules/.bin/node node_modules/@modelcontextprotocol/
# conformance/dist/index.js` from here; nothing is downloaded at test time.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$here/tests/conformance"
stamp="$dir/node_modules/.toolbridge-installed"

installed_ok() {
    [[ -x "$dir/node_modules/.bin/node" ]] || return 1
    [[ -f "$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js" ]] || return 1
    [[ -f "$dir/node_modules/conformance-alpha/dist/index.js" ]] || return 1
    [[ -f "$dir/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js" ]] || return 1
    [[ -f "$stamp" ]] || return 1
    cmp -s "$stamp" "$dir/package-lock.json" || return 1
    "$dir/node_modules/.bin/node" --version | grep -q '^v22\.' || return 1
}

reference_ok() {  # $1: a reference server folder
    [[ -f "$1/node_modules/tsx/dist/cli.mjs" ]] || return 1
    [[ -f "$1/node_modules/.toolbridge-installed" ]] || return 1
    cmp -s "$1/node_modules/.toolbridge-installed" "$1/package-lock.json" || return 1
}

for ref in "$dir"/reference/*/; do
    ref="${ref%/}"
    if reference_ok "$ref"; then
        echo "reference server $(basename "$ref") already installed"
    else
        (cd "$ref" && npm ci --no-audit --no-fund --loglevel=error)
        cp "$ref/package-lock.json" "$ref/node_modules/.toolbridge-installed"
        echo "reference server $(basename "$ref") installed"
    fi
done

if installed_ok; then
    echo "conformance suite already installed ($("$dir/node_modules/.bin/node" --version))"
    exit 0
fi

cd "$dir"
if [[ -f package-lock.json ]]; then
    npm ci --no-audit --no-fund --loglevel=error
else
    npm install --no-audit --no-fund --loglevel=error
fi
"$dir/node_modules/.bin/node" --version | grep -q '^v22\.' || {
    echo "install-conformance: node_modules/.bin/node is not Node 22" >&2
    exit 1
}
"$dir/node_modules/.bin/node" "$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js" --version >/dev/null
"$dir/node_modules/.bin/node" "$dir/node_modules/conformance-alpha/dist/index.js" --version >/dev/null
cp package-lock.json "$stamp"
echo "conformance suite installed ($("$dir/node_modules/.bin/node" --version))"
