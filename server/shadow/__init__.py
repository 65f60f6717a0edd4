"""A shadow policy: every live call judged again by a second policy that never decides, and the differences counted."""
