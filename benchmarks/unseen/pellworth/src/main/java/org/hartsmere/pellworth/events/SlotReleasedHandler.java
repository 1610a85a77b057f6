package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "slot released" event from the floor's controllers. */
public final class SlotReleasedHandler implements Handler {
    private final EventLog log;

    public SlotReleasedHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/slotReleased";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
