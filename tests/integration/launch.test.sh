#!/bin/sh
# `corral launch` against a real `corral serve`, with fake tools (one script first on PATH,
# linked under each tool's name) that record the arguments and environment they were started
# with: the tool list, each tool's wiring (Claude Code, Copilot CLI and OpenCode by
# environment, Codex by its launch profile, Droid by its settings file, kept and backed up),
# arguments after --, the API key passed on, the tool's exit status returned, Codex's version
# checked and its files removed by --restore, the context warning, the errors for a missing
# tool and a missing model, and a missing model pulled with --yes. No model is loaded.
# Env: CORRAL_BIN, CORRAL_FIXTURES. Exits non-zero on the first failed check.
set -eu
. "$(dirname "$0")/lib.sh"
# no network: the one pull below is of the model shipped inside the binary
export https_proxy=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 http_proxy=http://127.0.0.1:9 \
    ALL_PROXY=http://127.0.0.1:9 all_proxy=http://127.0.0.1:9 no_proxy=127.0.0.1 NO_PROXY=127.0.0.1
serve_in_scratch launch
unset CORRAL_API_KEY OLLAMA_API_KEY CORRAL_CONTEXT_LENGTH OLLAMA_CONTEXT_LENGTH
expect() { grep -qF -- "$2" "$3" || fail "$1: expected '$2' in: $(cat "$3")"; ok "$1"; }
refute() { if grep -qF -- "$2" "$3"; then fail "$1: did not expect '$2' in: $(cat "$3")"; fi; ok "$1"; }

printf 'FROM %s\n' "$CORRAL_FIXTURES/tiny-tolstoy-f32.gguf" >"$work/Modelfile"
"$corral" create tiny -f "$work/Modelfile" >"$work/out" 2>&1 || fail "create: $(cat "$work/out")"

mkdir -p "$work/bin" "$work/log"
cat >"$work/bin/fake-tool" <<'EOF'
#!/bin/sh
name=$(basename "$0")
if [ "$name" = codex ] && [ "${1-}" = --version ]; then echo "codex-cli ${FAKE_CODEX_VERSION:-0.140.0}"; exit 0; fi
printf '%s\n' "$@" >"$FAKE_LOG/$name.args"
env >"$FAKE_LOG/$name.env"
exit 7
EOF
chmod +x "$work/bin/fake-tool"
for tool in claude codex copilot opencode qwen kimi pool cline pi; do ln -s fake-tool "$work/bin/$tool"; done
export FAKE_LOG="$work/log"
tools_path="$work/bin:$PATH"

PATH="$tools_path" "$corral" launch >"$work/out" 2>&1 || fail "list: $(cat "$work/out")"
expect "the list shows an installed tool's path" "installed: $work/bin/claude" "$work/out"
expect "the list says how to install a missing tool" "droid      Droid          not installed" "$work/out"

if "$corral" launch codex --model tiny >"$work/out" 2>&1; then fail "launch without codex succeeded"; fi
expect "a missing tool is named with its installer" "npm install -g @openai/codex" "$work/out"

status=0
PATH="$tools_path" "$corral" launch claude --model nosuch >"$work/out" 2>&1 || status=$?
[ "$status" = 1 ] || fail "a missing model exited $status"
expect "a missing model is an error naming the pull" "model 'nosuch' not found; pull it with 'corral pull nosuch'" "$work/out"
[ ! -e "$work/log/claude.args" ] || fail "the tool ran for a missing model"
if PATH="$tools_path" "$corral" launch claude --model tiny-tolstoy </dev/null >"$work/out" 2>&1; then
    fail "a missing model was pulled without --yes"
fi
PATH="$tools_path" "$corral" launch claude --model tiny-tolstoy --yes </dev/null >"$work/out" 2>&1 || true
expect "--yes pulls a missing model" "success" "$work/out"
expect "--yes then launches the tool" "tiny-tolstoy" "$work/log/claude.args"
rm "$work/log/claude.args"

status=0
PATH="$tools_path" CORRAL_API_KEY=sekrit "$corral" launch claude --model tiny -- --resume 'two words' \
    >"$work/out" 2>&1 || status=$?
[ "$status" = 7 ] || fail "claude's exit status 7 came back as $status: $(cat "$work/out")"
ok "the tool's exit status is launch's"
printf -- '--model\ntiny\n--resume\ntwo words\n' | cmp -s - "$work/log/claude.args" ||
    fail "claude's arguments: $(cat "$work/log/claude.args")"
ok "claude gets --model and the arguments after --"
expect "claude is sent to the server" "ANTHROPIC_BASE_URL=http://127.0.0.1:$port" "$work/log/claude.env"
expect "claude sends the API key" "ANTHROPIC_AUTH_TOKEN=sekrit" "$work/log/claude.env"
expect "claude's small models are the model too" "ANTHROPIC_DEFAULT_HAIKU_MODEL=tiny" "$work/log/claude.env"
expect "a model trained for a short context is warned about" \
    "Warning: tiny was trained for a context of 256 tokens; Claude Code needs at least 65536" "$work/out"

PATH="$tools_path" "$corral" launch copilot-cli --model tiny >"$work/out" 2>&1 || true
expect "copilot is sent to the server" "COPILOT_PROVIDER_BASE_URL=http://127.0.0.1:$port/v1" "$work/log/copilot.env"
expect "copilot gets the model" "COPILOT_MODEL=tiny" "$work/log/copilot.env"

PATH="$tools_path" "$corral" launch opencode --model tiny >"$work/out" 2>&1 || true
expect "opencode's config names the server" "\"baseURL\":\"http://127.0.0.1:$port/v1\"" "$work/log/opencode.env"
expect "opencode's config selects the model" '"model":"corral/tiny"' "$work/log/opencode.env"

mkdir -p "$HOME/.codex"
echo 'model = "gpt-5"' >"$HOME/.codex/config.toml"
PATH="$tools_path" "$corral" launch codex --model tiny -- --sandbox workspace-write >"$work/out" 2>&1 || true
expect "codex gets the launch profile" "corral-launch" "$work/log/codex.args"
expect "codex gets the arguments after --" "workspace-write" "$work/log/codex.args"
expect "codex's profile points at the server" "base_url = \"http://127.0.0.1:$port/v1/\"" "$HOME/.codex/corral-launch.config.toml"
expect "codex's catalog has the model" '"slug": "tiny"' "$HOME/.codex/corral-launch.model.json"
expect "codex's catalog has the model's context" '"context_window": 256' "$HOME/.codex/corral-launch.model.json"
expect "codex's own config stays" 'model = "gpt-5"' "$HOME/.codex/config.toml"
if PATH="$tools_path" FAKE_CODEX_VERSION=0.87.0 "$corral" launch codex --model tiny >"$work/out" 2>&1; then fail "an old codex launched"; fi
expect "a codex too old for profiles is refused" "codex 0.87.0 is too old" "$work/out"
"$corral" launch codex --restore >"$work/out" 2>&1 || fail "codex --restore: $(cat "$work/out")"
[ ! -e "$HOME/.codex/corral-launch.config.toml" ] && [ ! -e "$HOME/.codex/corral-launch.model.json" ] ||
    fail "codex --restore left launch's files"
expect "codex --restore keeps the user's config" 'model = "gpt-5"' "$HOME/.codex/config.toml"
if PATH="$tools_path" "$corral" launch codex --model tiny -- -m other >"$work/out" 2>&1; then fail "codex -m accepted"; fi
expect "an argument that undoes codex's wiring is refused" "conflicting extra argument '-m'" "$work/out"
[ ! -e "$HOME/.codex/corral-launch.config.toml" ] || fail "a refused argument still wrote codex's profile"
ok "a refused argument writes nothing"

mkdir -p "$HOME/.factory"
cat >"$HOME/.factory/settings.json" <<'EOF'
{"theme": "dark", "customModels": [{"model": "gpt", "baseUrl": "https://api.example/v1", "apiKey": "x"}]}
EOF
"$corral" launch droid --model tiny --config >"$work/out" 2>&1 || fail "droid --config: $(cat "$work/out")"
expect "droid --config needs no droid installed" "Droid is set up for tiny" "$work/out"
expect "droid's settings keep the user's" '"theme": "dark"' "$HOME/.factory/settings.json"
expect "droid's settings keep the user's models" '"baseUrl": "https://api.example/v1"' "$HOME/.factory/settings.json"
expect "droid's settings point at the server" "\"baseUrl\": \"http://127.0.0.1:$port/v1\"" "$HOME/.factory/settings.json"
grep -qF '"theme": "dark"' "$HOME"/.corral/backup/droid/settings.json.* || fail "no backup of droid's settings"
ok "droid's old settings are backed up"
echo '{"theme": ' >"$HOME/.factory/settings.json"
if "$corral" launch droid --model tiny --config >"$work/out" 2>&1; then fail "broken settings overwritten"; fi
expect "broken settings are left for the user" "settings.json is not a JSON object" "$work/out"
if "$corral" launch claude --model tiny --config >"$work/out" 2>&1; then fail "claude --config succeeded"; fi
expect "--config for a tool with no config file" "has no config file to write" "$work/out"

status=0
PATH="$tools_path" "$corral" launch qwen </dev/null >"$work/out" 2>&1 || status=$?
[ "$status" = 2 ] || fail "no --model without a terminal exited $status"
expect "no --model without a terminal says to name one" "no terminal to choose one on, name it: corral launch qwen --model MODEL" "$work/out"

mkdir -p "$HOME/.qwen"
echo '{"theme": "dark"}' >"$HOME/.qwen/settings.json"
PATH="$tools_path" "$corral" launch qwen-code --model tiny -- --yolo >"$work/out" 2>&1 || true
expect "qwen is sent to the server" "OPENAI_BASE_URL=http://127.0.0.1:$port/v1" "$work/log/qwen.env"
expect "qwen uses OpenAI auth" "openai" "$work/log/qwen.args"
expect "qwen gets the arguments after --" "--yolo" "$work/log/qwen.args"
expect "qwen's settings name the server" "\"baseUrl\": \"http://127.0.0.1:$port/v1\"" "$HOME/.qwen/settings.json"
expect "qwen's settings keep the user's" '"theme": "dark"' "$HOME/.qwen/settings.json"
expect "the model is remembered for the tool" '"qwen": "tiny"' "$HOME/.corral/launch.json"

PATH="$tools_path" CORRAL_API_KEY=sekrit OPENAI_BASE_URL=https://api.example/v1 "$corral" launch kimi --model tiny >"$work/out" 2>&1 || true
expect "kimi's inline config names the server" "\"base_url\":\"http://127.0.0.1:$port/v1\"" "$work/log/kimi.args"
expect "kimi is told the context the model gets" '"max_context_size":256' "$work/log/kimi.args"
expect "kimi's OpenAI address is the server, not the user's" "OPENAI_BASE_URL=http://127.0.0.1:$port/v1" "$work/log/kimi.env"
expect "kimi gets the key by environment" "OPENAI_API_KEY=sekrit" "$work/log/kimi.env"
refute "the key is not in kimi's arguments" "sekrit" "$work/log/kimi.args"
PATH="$tools_path" "$corral" launch pool --model tiny >"$work/out" 2>&1 || true
expect "poolside is sent to the server" "POOLSIDE_STANDALONE_BASE_URL=http://127.0.0.1:$port/v1" "$work/log/pool.env"

"$corral" launch cline --model tiny --config >"$work/out" 2>&1 || fail "cline --config: $(cat "$work/out")"
expect "cline's provider is the server" "\"baseUrl\": \"http://127.0.0.1:$port/v1\"" "$HOME/.cline/data/settings/providers.json"
expect "cline's older state has the model" '"actModeOllamaModelId": "tiny"' "$HOME/.cline/data/globalState.json"
mkdir -p "$HOME/.pi/agent"
echo '{"defaultModel": ' >"$HOME/.pi/agent/settings.json"
if "$corral" launch pi --model tiny --config >"$work/out" 2>&1; then fail "pi's broken settings overwritten"; fi
[ ! -e "$HOME/.pi/agent/models.json" ] || fail "pi's models.json written beside a broken settings.json"
ok "a broken file of two stops both"
rm "$HOME/.pi/agent/settings.json"
"$corral" launch pi --model tiny --config >"$work/out" 2>&1 || fail "pi --config: $(cat "$work/out")"
expect "pi's models name the server" "\"baseUrl\": \"http://127.0.0.1:$port/v1\"" "$HOME/.pi/agent/models.json"
expect "pi's default is the model" '"defaultModel": "tiny"' "$HOME/.pi/agent/settings.json"
