"""Secrets: the resolution order, the secrets file formats, and redaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolbridge.errors import ConfigError
from toolbridge.manifest import Secret, check_manifest, load_manifest
from toolbridge.manifest._kinds import OpenaiModelDoc
from toolbridge.manifest._secrets import SecretSources, parse_secret_arg, read_secrets_file, upper_snake

MODEL = 'kind: AiOpenai.OpenaiModel\nmetadata: {{ name: M }}\nmodel: gpt-4o-mini\napiKey: "{value}"\n'


def _api_key(tmp_path: Path, text: str, **kwargs: object) -> str:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    manifest = load_manifest(path, **kwargs)  # type: ignore[arg-type]
    doc = manifest.analysis.docs["M"].model
    assert isinstance(doc, OpenaiModelDoc)
    assert isinstance(doc.api_key, Secret)
    return doc.api_key.reveal()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("openaiApiKey", "OPENAI_API_KEY"),
        ("api-key", "API_KEY"),
        ("HTTPToken", "HTTP_TOKEN"),
        ("token2Value", "TOKEN2_VALUE"),
        ("ALREADY_SNAKE", "ALREADY_SNAKE"),
    ],
)
def test_upper_snake(name: str, expected: str) -> None:
    assert upper_snake(name) == expected


def test_resolution_order() -> None:
    env = {"MAPPED": "from-mapping", "key": "from-env", "KEY": "from-snake"}
    assert SecretSources(given={"key": "given"}, mapping={"key": "MAPPED"}, env=env).lookup("key") == "given"
    assert SecretSources(mapping={"key": "MAPPED"}, env=env).lookup("key") == "from-mapping"
    assert SecretSources(mapping={"key": "UNSET"}, env=env).lookup("key") == "from-env"
    assert SecretSources(env={"KEY": "from-snake"}).lookup("key") == "from-snake"
    assert SecretSources(env={}).lookup("key") is None


def test_secrets_document_maps_a_name_to_an_env_var(tmp_path: Path) -> None:
    text = MODEL.format(value="${{ secrets.openaiApiKey }}") + (
        "---\nkind: Secrets\nmetadata: { name: S }\nenv: { openaiApiKey: MY_KEY }\n"
    )
    assert _api_key(tmp_path, text, env={"MY_KEY": "k1", "OPENAI_API_KEY": "k2"}) == "k1"
    assert _api_key(tmp_path, text, env={"OPENAI_API_KEY": "k2"}) == "k2"
    assert _api_key(tmp_path, text, env={"MY_KEY": "k1"}, secrets={"openaiApiKey": "k0"}) == "k0"


def test_interpolated_secret(tmp_path: Path) -> None:
    text = MODEL.format(value="pre-${{ secrets.a }}-${{secrets.b}}-post")
    assert _api_key(tmp_path, text, env={"a": "1", "B": "2"}) == "pre-1-2-post"


def test_secret_is_redacted() -> None:
    secret = Secret("${{ secrets.x }}", ("x",), "hunter2")
    assert str(secret) == "***"
    assert "hunter2" not in repr(secret)
    assert f"{secret}" == "***"
    assert secret.reveal() == "hunter2"
    with pytest.raises(ConfigError) as info:
        Secret("${{ secrets.x }}", ("x",), None).reveal()
    assert info.value.code == "ERR_MANIFEST_SECRET_UNRESOLVED"


def test_dotenv_secrets_file(tmp_path: Path) -> None:
    path = tmp_path / "secrets.env"
    path.write_text("# comment\n\nexport openaiApiKey='sk-1'\nOTHER=\"two words\"\nPLAIN=x=y\n")
    assert read_secrets_file(path) == {"openaiApiKey": "sk-1", "OTHER": "two words", "PLAIN": "x=y"}


def test_yaml_and_json_secrets_files(tmp_path: Path) -> None:
    yml = tmp_path / "s.yaml"
    yml.write_text("openaiApiKey: sk-1\nport: 8080\n")
    assert read_secrets_file(yml) == {"openaiApiKey": "sk-1", "port": "8080"}
    js = tmp_path / "s.json"
    js.write_text('{"openaiApiKey": "sk-2"}')
    assert read_secrets_file(js) == {"openaiApiKey": "sk-2"}


def test_bad_secrets_file_never_quotes_its_content(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("token: [sk-VERYSECRET\n")
    with pytest.raises(ConfigError) as info:
        read_secrets_file(path)
    assert info.value.code == "ERR_MANIFEST_SECRETS_FILE"
    assert "VERYSECRET" not in str(info.value)
    nested = tmp_path / "n.yaml"
    nested.write_text("token: {a: sk-VERYSECRET}\n")
    with pytest.raises(ConfigError) as info:
        read_secrets_file(nested)
    assert "VERYSECRET" not in str(info.value)
    with pytest.raises(ConfigError):
        read_secrets_file(tmp_path / "missing.env")


def test_secrets_file_argument(tmp_path: Path) -> None:
    secrets = tmp_path / "s.env"
    secrets.write_text("openaiApiKey=sk-file\n")
    path = tmp_path / "m.yaml"
    path.write_text(MODEL.format(value="${{ secrets.openaiApiKey }}"))
    assert check_manifest(path, env={}, secrets_file=secrets).ok
    assert not check_manifest(path, env={}).ok


def test_secret_arg_parsing() -> None:
    assert parse_secret_arg("a=b=c") == ("a", "b=c")
    with pytest.raises(ConfigError) as info:
        parse_secret_arg("sk-no-name")
    assert "sk-no-name" not in str(info.value)


def test_load_manifest_refuses_errors(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(MODEL.format(value="${{ secrets.openaiApiKey }}"))
    with pytest.raises(ConfigError) as info:
        load_manifest(path, env={})
    assert info.value.code == "ERR_MANIFEST_SECRET_UNRESOLVED"
    assert "secret openaiApiKey cannot be resolved" in info.value.message
    assert info.value.details["diagnostics"][0]["line"] == 4


def test_manifest_dir_expression(tmp_path: Path) -> None:
    text = 'kind: Mcp.StdioClient\nmetadata: { name: C }\ncommand: node\nargs: ["${{ manifestDir }}/x.js"]\n'
    path = tmp_path / "m.yaml"
    path.write_text(text)
    manifest = load_manifest(path, env={})
    assert manifest.analysis.docs["C"].model.args == [f"{tmp_path.resolve()}/x.js"]  # type: ignore[attr-defined]
