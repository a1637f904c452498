"""Long-term memory: what a conversation states (speech acts), and how it stays true."""
