package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "slot booked" event from the floor's controllers. */
public final class SlotBookedHandler implements Handler {
    private final EventLog log;

    public SlotBookedHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/slotBooked";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
