package org.hartsmere.pellworth.events;

/** A message as the controllers send it: a topic and a JSON payload. */
public record Event(String topic, String payload) {}
