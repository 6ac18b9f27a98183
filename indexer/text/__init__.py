"""Documents as text: corpus readers, sections -> paragraphs -> sentences, and token chunks."""
