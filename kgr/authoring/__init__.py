"""Writing knowledge: ``nodes`` creates, edits and links documents and entities by hand,
``templates`` renders Mustache document templates."""
