package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "sample taken" event from the floor's controllers. */
public final class SampleTakenHandler implements Handler {
    private final EventLog log;

    public SampleTakenHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/sampleTaken";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
