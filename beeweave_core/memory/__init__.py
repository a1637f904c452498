"""Long-term memory: what a conversation states (speech acts), and how it stays true
(supersession, dormancy), kept in one place with the engine's index of a session's memories
(``views``) so a change to what a memory is touches one package."""
