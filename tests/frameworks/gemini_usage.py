"""Gemini's usage report for one model call, as the ADK-based test peers' scripted models
(tests/frameworks/adk, tests/frameworks/kagent) attach it to their responses; imported with
tests/ on sys.path (`from frameworks.gemini_usage import usage_metadata`)."""

from google.genai import types


def usage_metadata(usage, done=True):
    """`usage` is (prompt, candidates, thoughts, cached), or None for no report. Gemini counts
    thoughts beside the candidates (totalTokenCount = prompt + candidates + thoughts) and,
    before a stream's last chunk, only the prompt (`done` False)."""
    if usage is None:
        return None
    prompt, candidates, thoughts, cached = usage
    if not done:
        candidates, thoughts = 0, 0
    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=candidates,
        thoughts_token_count=thoughts,
        cached_content_token_count=cached,
        total_token_count=prompt + candidates + thoughts,
    )
