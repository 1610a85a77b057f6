package org.hartsmere.pellworth.events;

import org.hartsmere.pellworth.store.EventLog;

/** Handles a "sample rejected" event from the floor's controllers. */
public final class SampleRejectedHandler implements Handler {
    private final EventLog log;

    public SampleRejectedHandler(EventLog log) {
        this.log = log;
    }

    @Override
    public String topic() {
        return "floor/sampleRejected";
    }

    @Override
    public void handle(Event event) {
        log.append(topic(), event.payload());
    }
}
