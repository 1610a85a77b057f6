package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "charge raised" event from the floor's controllers. */
public final class ChargeRaisedHandler implements Handler {
    private final EventLog log;

    public ChargeRaisedHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/chargeRaised";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
