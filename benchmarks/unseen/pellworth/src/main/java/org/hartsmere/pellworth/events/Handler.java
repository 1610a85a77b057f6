package org.hartsmere.pellworth.events;

/** One kind of message from the drying floor's controllers. */
public interface Handler {
    String topic();

    void handle(Event event);
}
