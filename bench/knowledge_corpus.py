"""Generated corpora for bench/knowledge.py, deterministic for a seed.

(a) Retrieval quality: short documents over 25 topics (invoices, travel, health, software
incidents, HR policy, recipes, ...). Each "answer" document holds one fact a question asks
about; "distractor" documents on the same topics share the questions' words without holding
the answer (e.g. "ask Ana how long a transfer takes if you settle a bill from abroad" for
"how long do I have to settle the bill?"), and more documents hold only the topic's filler.
Two kinds of question:

* paraphrase: written with other words than the answer ("how long do I have to settle the
  bill?" for "payment is due within 30 days of the invoice date"); they share no content
  word with their answer document (lower-cased, plurals stripped, stop words removed),
  checked here, and most share none even by a cruder prefix test (printed too);
* direct: the words a user who has the document in front of them would use ("when is
  payment due on invoice 4471?").

The questions were written before any search ran and are a held-out set: nothing in the
knowledge package is tuned on them, and they are not to be changed to suit it.

(b) Indexing: 1,000 mixed documents (~200 MB) — PDF (fpdf2), DOCX (python-docx), XLSX
(openpyxl), PPTX (python-pptx), HTML, Markdown and text — in a folder; and plain chunk
texts for filling an index quickly.

Run: .venv/bin/python bench/knowledge_corpus.py [--mixed DIR]  (prints what it generates)
"""

from __future__ import annotations

import argparse
import datetime
import html
import itertools
import json
import random
import re
import shutil
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

SEED = 29


@dataclass(frozen=True)
class Fact:
    """One fact of a topic. `{name:a|b|c}` picks one of the values (the same name later
    repeats it); `{company}`, `{person}`, ... are drawn from the pools below."""

    passage: str  # the sentence(s) holding the fact, in its answer document
    question: str  # a paraphrase: shares no content word with the answer document
    key: str  # text the answer passage holds (a hit must contain it)
    direct: str | None  # a question in the document's own words, or None
    trap: str  # a distractor sentence: the question's words, not its answer


@dataclass(frozen=True)
class Topic:
    name: str
    title: str
    fillers: tuple[str, ...]
    facts: tuple[Fact, ...]


F = Fact
TOPICS: tuple[Topic, ...] = (
    Topic(
        "invoices",
        "Invoice {num} from {company}",
        (
            "The document lists {n:3|4|5|7} line items for office supplies.",
            "All amounts include value added tax.",
            "It was sent to the accounts inbox on {date}.",
            "Purchase order reference PO-{num2}.",
        ),
        (
            F(
                "Payment is due within {days:14|21|30|45} days of the invoice date.",
                "How long do I have to settle the bill?",
                "{days} days",
                "When is payment due on invoice {num}?",
                "Ask {person} how long a transfer takes if you settle a bill from abroad.",
            ),
            F(
                "A late fee of {pct:1.5|2|3} percent is added to overdue balances each month.",
                "What penalty applies when we pay behind schedule?",
                "{pct} percent",
                None,
                "The payment schedule shows when each penalty notice was sent to us.",
            ),
            F(
                "Bank details: account holder {company}, IBAN ending in {digits:4471|9032|1186}.",
                "Where should I wire the funds?",
                "{digits}",
                "What IBAN is on invoice {num} from {company}?",
                "Funds for the wire to the {city} office were approved by {person}.",
            ),
            F(
                "The supplier grants a {pct:2|3|5} percent discount if the amount is paid "
                "within ten days.",
                "Is there a reduction for settling early?",
                "{pct} percent discount",
                None,
                "Settling early is recommended by {person}, who keeps the supplier list.",
            ),
            F(
                "Disputed charges must be reported to {person} in billing before the next "
                "statement.",
                "Who handles complaints about a wrong total?",
                "{person}",
                "Who do I report disputed charges on invoice {num} to?",
                "Complaints about a wrong total on canteen receipts are handled at reception.",
            ),
            F(
                "Numbering restarts at 1 every January, so always quote the year as well.",
                "Does the reference sequence begin afresh annually?",
                "January",
                None,
                "Each reference in the sequence is printed at the top of the page.",
            ),
        ),
    ),
    Topic(
        "travel",
        "Trip to {city}: booking {num}",
        (
            "The booking was made through the company travel desk.",
            "Travellers should keep all receipts for the expense report.",
            "The itinerary was confirmed on {date}.",
            "Contact {person} for changes.",
        ),
        (
            F(
                "The flight departs at {time:06:40|07:15|08:05|09:30} from terminal {t:1|2|3}.",
                "What hour does the plane leave?",
                "{time}",
                "When does the flight to {city} depart, booking {num}?",
                "Which plane type is used varies; the hour of boarding is printed on the pass.",
            ),
            F(
                "Hotel {company} includes breakfast, served from {b:6:30|7:00} in the lobby "
                "restaurant.",
                "Is the morning meal covered where we stay?",
                "breakfast",
                "Does hotel {company} include breakfast?",
                "The morning meal on the train is not covered by the policy where we stay.",
            ),
            F(
                "Checked luggage is limited to one bag of {kg:20|23} kilograms per traveller.",
                "How heavy can my suitcase be?",
                "{kg} kilograms",
                None,
                "Your suitcase can be heavy on the way back with samples; a courier can help.",
            ),
            F(
                "Visas are not needed for stays shorter than {d:30|90} days.",
                "Do I require an entry permit for a brief visit?",
                "{d} days",
                None,
                "An entry permit for the lab is required for every visit; ask security.",
            ),
            F(
                "Reimbursement for taxis is capped at {amount:40|60|80} euros per day.",
                "What's the maximum I can claim back for cabs?",
                "{amount} euros",
                "How much taxi reimbursement per day for the {city} trip?",
                "Claim back forms for cabs booked through the app are on the intranet.",
            ),
            F(
                "The return train leaves {city2} on {weekday} at {time:17:10|18:45}.",
                "When do we head home by rail?",
                "{time}",
                None,
                "Rail strikes announced for next month may affect heading home.",
            ),
        ),
    ),
    Topic(
        "health",
        "Clinic letter {num} for {person}",
        (
            "The clinic is on the second floor of the {city} medical centre.",
            "Bring your insurance card to every visit.",
            "This letter was written on {date}.",
            "Questions can be sent through the patient portal.",
        ),
        (
            F(
                "Take one {mg:200|400} mg tablet of ibuprofen every {h:6|8} hours with food.",
                "How often should the painkiller pills be swallowed?",
                "{h} hours",
                "How often can I take ibuprofen?",
                "Pills that are hard to swallow can be crushed; ask how often that is safe.",
            ),
            F(
                "The blood test must be done fasting: no food or drink except water for "
                "{h:8|10|12} hours before.",
                "Can I eat before having my sample taken?",
                "fasting",
                "Does the blood test need fasting?",
                "Samples taken for the research study are kept; you can eat in the cafeteria.",
            ),
            F(
                "Physiotherapy sessions are on {weekday}s at {time:10:00|14:30} for six weeks.",
                "When are my rehab exercises scheduled?",
                "{time}",
                None,
                "Rehab exercises can also be done at home; a scheduled video call explains them.",
            ),
            F(
                "Dr {person2} advises against alcohol while taking the antibiotic.",
                "Is it okay to drink beer or wine during this medicine course?",
                "alcohol",
                None,
                "Beer and wine are not served at the charity dinner; drink machines take coins.",
            ),
            F(
                "Your next vaccination booster is due in {m:6|12} months.",
                "When do I need another jab?",
                "{m} months",
                "When is the next vaccination booster due?",
                "You need another form signed if a jab is given to a child.",
            ),
            F(
                "Allergy noted: penicillin causes a rash and swelling.",
                "Which drug am I sensitive to?",
                "penicillin",
                None,
                "Drug prices for creams for sensitive skin went up this year.",
            ),
        ),
    ),
    Topic(
        "incidents",
        "Incident report INC-{num}",
        (
            "Severity was set by the on-call engineer.",
            "The timeline below is in UTC.",
            "Status page updated on {date}.",
            "Follow-up tasks are tracked in the team board.",
        ),
        (
            F(
                "Root cause: an expired TLS certificate on the load balancer stopped all "
                "HTTPS traffic.",
                "Why did the website go down?",
                "certificate",
                "What was the root cause of incident INC-{num}?",
                "The website team will go through the design review on {weekday}.",
            ),
            F(
                "The outage lasted {min:42|57|73} minutes in total.",
                "How long was the service unavailable?",
                "{min} minutes",
                "How long did the outage in INC-{num} last?",
                "The service catalogue lists how long each unavailable report is kept.",
            ),
            F(
                "About {users:1200|3400|8000} customers could not log in during the event.",
                "How many users were affected?",
                "{users} customers",
                None,
                "Affected users of the beta can opt out in their settings.",
            ),
            F(
                "The fix was a rollback to release {ver:4.2.1|5.0.3|3.9.8}, deployed by {person}.",
                "What version did we revert to?",
                "{ver}",
                "Which release was the rollback in INC-{num} to?",
                "Revert requests for any version must be approved by the change board.",
            ),
            F(
                "Alerts fired late because the monitoring threshold was set to {pct:95|99} "
                "percent CPU.",
                "Why were we notified so slowly?",
                "threshold",
                None,
                "Slowly rising memory use was notified to the database team last week.",
            ),
            F(
                "To prevent a repeat, certificates now renew automatically {d:14|30} days "
                "before expiry.",
                "What stops this happening again?",
                "renew automatically",
                None,
                "Stop the deploy pipeline if this happens during a freeze.",
            ),
        ),
    ),
    Topic(
        "hr",
        "Staff handbook, section {num}",
        (
            "This section applies to everyone on permanent contracts.",
            "It was last reviewed on {date}.",
            "Managers should share it with new starters.",
            "Questions go to the people team.",
        ),
        (
            F(
                "Full-time staff receive {d:25|28|30} days of paid annual leave, bank "
                "holidays not included.",
                "What vacation allowance do employees get per year?",
                "{d} days",
                "How many days of paid annual leave do full-time staff receive?",
                "Vacation photos for the newsletter can be sent to the editor each year.",
            ),
            F(
                "Parental leave is {w:16|20|26} weeks at full pay for either parent.",
                "How long can a new mother or father stay home with the baby?",
                "{w} weeks",
                "How many weeks of parental leave at full pay?",
                "A new baby photo board is up in the kitchen; stay tuned for the party.",
            ),
            F(
                "Remote work is allowed up to {n:2|3} days a week with a manager's approval.",
                "Can I do my job from my house?",
                "{n} days a week",
                None,
                "Jobs posted in-house are open to everyone for two weeks.",
            ),
            F(
                "Expense claims must be filed within {d:30|60} days of the purchase.",
                "What's the deadline for getting reimbursed?",
                "{d} days",
                None,
                "Getting reimbursed for the team dinner needs the receipt and the guests' names.",
            ),
            F(
                "Sick days need a doctor's note from the {n:third|fourth} consecutive day of "
                "absence.",
                "When do I have to show a medical certificate if I'm ill?",
                "{n} consecutive day",
                None,
                "Show your certificate of completion for the medical training to HR.",
            ),
            F(
                "The notice period for resigning is {m:one month|two months|three months}.",
                "How much warning must I give before quitting?",
                "{m}",
                "What is the notice period for resigning?",
                "Give a warning to the fire marshal before you block a corridor.",
            ),
        ),
    ),
    Topic(
        "recipes",
        "Recipe card {num}: {dish}",
        (
            "Serves four.",
            "Preparation takes about twenty minutes.",
            "From the family cookbook, written down on {date}.",
            "Use a large heavy pan.",
        ),
        (
            F(
                "Bake at {temp:180|200|220} degrees Celsius for {min:25|35|45} minutes until "
                "golden.",
                "What oven setting, and for how long?",
                "{temp} degrees",
                "At what temperature do I bake the {dish}?",
                "An oven mitt and a long spoon are on the list of kitchen tools.",
            ),
            F(
                "Replace the eggs with two tablespoons of ground flaxseed mixed with water "
                "for a vegan version.",
                "How do I make this without animal products?",
                "flaxseed",
                None,
                "Animal welfare products are sold at the farm shop next to the market.",
            ),
            F(
                "The dough must rest in the fridge for {h:1|2} hours before rolling.",
                "How long should the pastry chill?",
                "{h} hours",
                "How long does the dough rest in the fridge?",
                "Pastry shops chill their display cases overnight.",
            ),
            F(
                "Contains peanuts and sesame.",
                "What allergens does this dish include?",
                "peanuts",
                None,
                "Allergens must be listed for every dish in the canteen by law.",
            ),
            F(
                "Leftovers keep for {d:3|4} days in an airtight container in the refrigerator.",
                "How long will the extra portions stay fresh?",
                "{d} days",
                None,
                "Extra portions of soup were given to the shelter to stay fresh.",
            ),
            F(
                "Swap the cream for yoghurt to cut the calories by about a third.",
                "Is there a lighter option with less fat?",
                "yoghurt",
                None,
                "Lighter options with less fat are marked green on the menu.",
            ),
        ),
    ),
    Topic(
        "housing",
        "Lease for flat {num}, {street}",
        (
            "The agreement runs for twelve months from {date}.",
            "Keys: two front door keys and one mailbox key.",
            "The building has a shared bike room.",
            "Management company: {company}.",
        ),
        (
            F(
                "Rent of {amount:950|1150|1400} euros is paid on the first working day of "
                "each month.",
                "How much do I owe the landlord?",
                "{amount} euros",
                "How much is the rent for flat {num}?",
                "Tenants who owe the landlord for repairs receive a letter.",
            ),
            F(
                "The deposit equals {n:two|three} months' rent and is returned within "
                "{d:14|30} days after moving out.",
                "When do I get my security money back once I leave?",
                "returned within {d} days",
                None,
                "Security money for the bike room card is kept by the caretaker.",
            ),
            F(
                "Pets are allowed only with written permission from the owner.",
                "Can I keep a dog or cat here?",
                "permission",
                "Are pets allowed in flat {num}?",
                "Dog and cat food deliveries are left at the front desk.",
            ),
            F(
                "Heating and water costs are included; electricity is billed separately.",
                "Which utilities are covered by the monthly payment?",
                "electricity",
                None,
                "Utilities in the common area are covered by the monthly service charge.",
            ),
            F(
                "Either side may end the lease with {n:one|two|three} months' notice in writing.",
                "How do I terminate the contract early?",
                "notice",
                None,
                "Early termination of the cleaning contract was discussed with the residents.",
            ),
            F(
                "Repairs are reported to the caretaker, {person}, who visits on {weekday}s.",
                "Who fixes things that break in the apartment?",
                "{person}",
                "Who are repairs at {street} reported to?",
                "Break times for the apartment cleaning crew are posted in the stairwell.",
            ),
        ),
    ),
    Topic(
        "car",
        "Service record {num}: {car}",
        (
            "Inspected at the {city} workshop.",
            "Odometer at the visit: {num2}0 km.",
            "Receipt attached.",
            "Next inspection reminder set for {date}.",
        ),
        (
            F(
                "The oil should be changed every {km:10,000|15,000} kilometres or once a year.",
                "How often does the engine lubricant need replacing?",
                "{km}",
                "How often should the oil be changed on the {car}?",
                "Engine lubricant brands differ; the shop replaces filters too.",
            ),
            F(
                "Tyre pressure: {bar:2.2|2.4} bar front and rear.",
                "How much air should the wheels have?",
                "{bar} bar",
                "What tyre pressure for the {car}?",
                "Air fresheners and wheel covers are sold at reception.",
            ),
            F(
                "The brake pads were replaced at this visit.",
                "Did the mechanic renew the stopping components?",
                "brake pads",
                None,
                "Stopping at the components counter, the mechanic renewed the loyalty cards.",
            ),
            F(
                "The warranty covers the gearbox until {until:March 2027|June 2026}.",
                "Until when is the transmission guaranteed?",
                "{until}",
                None,
                "Transmission fluid is guaranteed to last for years, the brochure says.",
            ),
            F(
                "The timing belt is due for replacement at {km:120,000|150,000} km.",
                "When must the cambelt be swapped?",
                "{km} km",
                "When is the timing belt due on the {car}?",
                "Swapped cars in the pool fleet must be logged.",
            ),
            F(
                "A warning light for the battery came on; the alternator was tested and is fine.",
                "Why did the dashboard lamp turn on?",
                "battery",
                None,
                "Dashboard cameras turn on automatically when you start driving.",
            ),
        ),
    ),
    Topic(
        "insurance",
        "Home insurance policy {num}",
        (
            "The insurer is {company} Mutual.",
            "The policy renews on {date}.",
            "Keep this document with your other contracts.",
            "Premiums are collected by direct debit.",
        ),
        (
            F(
                "Water damage from burst pipes is covered up to {amount:10,000|25,000} euros.",
                "Am I protected if a leak floods the kitchen?",
                "{amount} euros",
                "Is water damage covered by policy {num}?",
                "Kitchen leak detectors are protected by a separate warranty.",
            ),
            F(
                "The excess for each claim is {amount:250|500} euros.",
                "How much do I pay myself before they step in?",
                "{amount} euros",
                "What is the excess per claim on policy {num}?",
                "Steps to pay your premium online are in the app.",
            ),
            F(
                "Theft is only covered if there are signs of forced entry.",
                "Will they reimburse stolen items when nothing was broken?",
                "forced entry",
                None,
                "Items broken during the move are not reimbursed.",
            ),
            F(
                "Claims must be reported within {d:7|14} days of the incident.",
                "What's the time limit for telling them about damage?",
                "{d} days",
                None,
                "Time limits for parking outside the building are on the sign.",
            ),
            F(
                "Jewellery is covered only up to {amount:1,500|3,000} euros unless listed "
                "separately.",
                "Is grandma's ring fully protected?",
                "{amount} euros",
                None,
                "A ring binder with all your protected documents is useful.",
            ),
            F(
                "Cancelling within the first 14 days gives a full refund of the premium.",
                "Can I back out and get my money returned?",
                "full refund",
                None,
                "Money returned to customers by mistake must be paid back.",
            ),
        ),
    ),
    Topic(
        "banking",
        "Letter {num} from {company} Bank",
        (
            "Your account number ends in {num2}.",
            "This letter was sent on {date}.",
            "Call the branch in {city} with any questions.",
            "Online banking is available around the clock.",
        ),
        (
            F(
                "The overdraft limit on your current account is {amount:500|1,000|2,000} euros.",
                "How far into the red can I go?",
                "{amount} euros",
                "What is my overdraft limit?",
                "Red envelopes from the branch go to the post room.",
            ),
            F(
                "The savings account pays {rate:1.5|2.25|3.1} percent interest per year.",
                "What return does my deposit earn annually?",
                "{rate} percent",
                "What interest does the savings account pay?",
                "Deposit returns for bottles are paid in the shop annually.",
            ),
            F(
                "A lost card is blocked immediately by calling the 24-hour hotline.",
                "What should I do if my plastic goes missing?",
                "hotline",
                None,
                "Plastic bags go missing from the kitchen; please bring your own.",
            ),
            F(
                "Transfers abroad cost a flat fee of {fee:5|8|12} euros.",
                "What's the charge for sending money overseas?",
                "{fee} euros",
                "What do transfers abroad cost at {company} Bank?",
                "Sending money overseas to family is easy with the mobile app.",
            ),
            F(
                "Statements are sent by post every quarter unless you switch to paperless.",
                "How often do I get a summary of my transactions?",
                "quarter",
                None,
                "Transactions often get summarised in the annual report.",
            ),
            F(
                "The mortgage rate is fixed at {rate:3.2|3.9|4.4} percent until {y:2029|2031}.",
                "Does my home loan interest stay the same?",
                "{rate} percent",
                None,
                "Home loan seminars are held at the branch every month.",
            ),
        ),
    ),
    Topic(
        "school",
        "Newsletter {num} from {school} School",
        (
            "Thank you to all parents who helped at the fair.",
            "The newsletter is also on the school website.",
            "Sent home on {date}.",
            "Contact the office with questions.",
        ),
        (
            F(
                "The autumn term ends on {end:18 December|20 December}.",
                "When do the kids break up for the winter holidays?",
                "{end}",
                "When does the autumn term end at {school} School?",
                "Winter holiday clubs for kids are run by the sports centre.",
            ),
            F(
                "Lunch costs {amount:2.40|2.80|3.10} euros a day and can be paid online.",
                "What's the price of a midday meal?",
                "{amount} euros",
                None,
                "Meal prices at the midday concert are on the poster.",
            ),
            F(
                "Pupils must wear the navy uniform with black shoes.",
                "What clothes do children have to put on?",
                "navy uniform",
                "What uniform do pupils at {school} School wear?",
                "Lost clothes are put in the box near the gym for children to collect.",
            ),
            F(
                "Homework takes about {min:30|45} minutes each evening in year {n:5|6}.",
                "How much time should students spend on their nightly assignments?",
                "{min} minutes",
                None,
                "Students spend time on group assignments in the library.",
            ),
            F(
                "Parent-teacher meetings are on {weekday} {on:14 November|21 November} from 4 pm.",
                "When can mum and dad talk to the staff about progress?",
                "{on}",
                None,
                "Staff talk about progress in sports at the end of each season.",
            ),
            F(
                "The school trip to the science museum costs {amount:15|20} euros.",
                "How much will the class excursion be?",
                "{amount} euros",
                "How much is the trip to the science museum?",
                "The class photo excursion to the park was cancelled because of rain.",
            ),
        ),
    ),
    Topic(
        "pets",
        "Vet record {num} for {pet}",
        (
            "Seen at the {city} animal clinic.",
            "Weight at the visit was recorded.",
            "Owner: {person}.",
            "Next check-up reminder sent on {date}.",
        ),
        (
            F(
                "Feed {g:60|80} grams of dry food twice a day.",
                "How much should the animal eat?",
                "{g} grams",
                "How much dry food should {pet} get?",
                "Animals eat in the back room while the clinic is cleaned.",
            ),
            F(
                "The rabies vaccine was given on {date2}; it protects for three years.",
                "When was the last shot?",
                "{date2}",
                "When was {pet} given the rabies vaccine?",
                "The last shot in the photo series shows the new waiting room.",
            ),
            F(
                "Flea treatment should be applied on the neck every {w:4|6} weeks.",
                "How often do I use the anti-parasite drops?",
                "{w} weeks",
                None,
                "Drops of water on the floor were cleaned up; use the mat.",
            ),
            F(
                "Avoid grapes and chocolate: both are toxic to dogs.",
                "Which snacks are poisonous for my puppy?",
                "chocolate",
                None,
                "Snacks for owners are in the machine near reception.",
            ),
            F(
                "The clinic's emergency line is open 24 hours on weekends.",
                "Can I get help at night on Saturday?",
                "emergency",
                None,
                "Help with parking on Saturday night is available from the attendant.",
            ),
            F(
                "Neutering is recommended at {m:six|nine} months of age.",
                "When is the right time to have her spayed?",
                "{m} months",
                None,
                "The right time to visit is before the queue builds up.",
            ),
        ),
    ),
    Topic(
        "garden",
        "Allotment notes, plot {num}",
        (
            "The plot gets sun from late morning.",
            "The soil is heavy clay.",
            "Notes written on {date}.",
            "Tools are kept in the shared shed.",
        ),
        (
            F(
                "Water the tomatoes deeply {n:twice|three times} a week rather than a little "
                "every day.",
                "How frequently do the vegetables need moisture?",
                "{n} a week",
                "How often should I water the tomatoes?",
                "Vegetables need moisture-proof labels so the names stay readable.",
            ),
            F(
                "Sow carrots outdoors from {month:April|May} in rows 20 cm apart.",
                "When do root crops go into the ground?",
                "{month}",
                "When can carrots be sown outdoors?",
                "Crops in the ground were damaged by frost last winter, the committee said.",
            ),
            F(
                "Slugs are kept off the lettuce with copper tape and beer traps.",
                "How do I protect the salad greens from pests?",
                "copper",
                None,
                "Salad greens from the plots are shared at the pest-free stall.",
            ),
            F(
                "Prune the apple tree in {month:January|February} while it is dormant.",
                "When should the fruit branches be cut back?",
                "{month}",
                None,
                "Fruit branches cut back by the storm are stacked by the gate.",
            ),
            F(
                "Compost needs a mix of green and brown waste in roughly equal parts.",
                "What ratio of kitchen scraps to dry leaves makes good soil improver?",
                "equal parts",
                None,
                "Kitchen scraps make the bins smell in summer; close the lid.",
            ),
            F(
                "The plot rent of {amount:35|45} euros is payable each {month:March|October}.",
                "What's the annual fee for the patch of land?",
                "{amount} euros",
                "How much is the plot rent?",
                "Land registry fees rose this year, the annual newsletter reports.",
            ),
        ),
    ),
    Topic(
        "it",
        "IT helpdesk article KB{num}",
        (
            "This article applies to company laptops.",
            "Updated on {date} by the service desk.",
            "If the steps do not work, open a ticket.",
            "Screenshots are in the attachment.",
        ),
        (
            F(
                "Passwords expire every {d:90|180} days and must have at least {n:12|14} "
                "characters.",
                "How often do I have to change my login code?",
                "{d} days",
                "How often do passwords expire?",
                "Code changes to the login page are reviewed by the web team.",
            ),
            F(
                "The VPN client is FortiClient; connect to the {city} gateway when travelling.",
                "Which remote access software do I install?",
                "FortiClient",
                "Which VPN client do we use?",
                "Remote access to the printer room requires your badge.",
            ),
            F(
                "Laptops are replaced every {y:three|four} years.",
                "When do I get a new computer?",
                "{y} years",
                None,
                "New computer mice are in the supply cupboard.",
            ),
            F(
                "Multi-factor authentication uses the Authenticator app; SMS codes are not "
                "accepted.",
                "Can I receive my second sign-in step by text message?",
                "SMS",
                None,
                "Text messages from unknown senders asking you to sign in are phishing.",
            ),
            F(
                "Printers on floor {n:2|3} need your badge to release a print job.",
                "How do I collect my pages from the copier?",
                "badge",
                None,
                "Pages left on the copier are collected and shredded every evening.",
            ),
            F(
                "Personal software may only be installed after approval from the security team.",
                "Am I allowed to put my own programs on the machine?",
                "approval",
                None,
                "Programs for the machine learning course are listed on the intranet.",
            ),
        ),
    ),
    Topic(
        "contracts",
        "Service agreement {num} with {company}",
        (
            "This agreement is governed by the law of the Netherlands.",
            "Signed by both parties on {date}.",
            "Annex A lists the contacts on each side.",
            "Amendments must be in writing.",
        ),
        (
            F(
                "The agreement renews automatically for one year unless cancelled "
                "{d:60|90} days before the end date.",
                "Does the deal roll over by itself?",
                "renews automatically",
                "Does agreement {num} renew automatically?",
                "The deal memo rolls over the open points to the next meeting.",
            ),
            F(
                "Liability is limited to the fees paid in the previous twelve months.",
                "What's the most they'd owe us if something goes wrong?",
                "twelve months",
                None,
                "Something went wrong with the video call; we owe them a new slot.",
            ),
            F(
                "Response time for critical issues is {h:2|4} hours, around the clock.",
                "How fast must the vendor react to a severe outage?",
                "{h} hours",
                "What is the response time for critical issues with {company}?",
                "Severe weather may delay the vendor's visit to the outage site.",
            ),
            F(
                "Either party may terminate for material breach after a 30 day cure period.",
                "Can we walk away if they break the rules?",
                "breach",
                None,
                "Break terms for the office lease were discussed last month.",
            ),
            F(
                "Invoices are paid in euros within {d:30|45} days of receipt.",
                "When do we get our money, and in what currency?",
                "{d} days",
                None,
                "Currency exchange money for the trip can be picked up on Friday.",
            ),
            F(
                "Confidential information must be kept secret for {y:3|5} years after the "
                "agreement ends.",
                "How long does the non-disclosure duty last?",
                "{y} years",
                None,
                "Duty rosters last for one quarter and are disclosed to all staff.",
            ),
        ),
    ),
    Topic(
        "orders",
        "Order {num} confirmation",
        (
            "Thank you for shopping with {company}.",
            "Your order was placed on {date}.",
            "Items are packed in recyclable material.",
            "Track the parcel with the link in your email.",
        ),
        (
            F(
                "Delivery is expected in {d:3|5} to {d2:7|10} working days.",
                "When will my package arrive?",
                "working days",
                "When is delivery expected for order {num}?",
                "Packages that arrive damaged should be photographed before opening.",
            ),
            F(
                "Returns are free within {d:14|30} days; use the prepaid label in the box.",
                "Can I send it back without paying?",
                "prepaid label",
                "Are returns free for order {num}?",
                "Sending back a gift without a receipt is not possible in our stores.",
            ),
            F(
                "Shipping to islands costs an extra {amount:9.95|14.50} euros.",
                "Is there a surcharge for remote locations?",
                "{amount} euros",
                None,
                "Remote locations on the map are shown in grey.",
            ),
            F(
                "If nobody is home, the courier leaves the parcel with a neighbour.",
                "What happens when I'm out during the drop-off?",
                "neighbour",
                None,
                "What happens to drop-off points during holidays is explained on the website.",
            ),
            F(
                "The blender comes with a {y:two|three}-year warranty.",
                "How long is the appliance guaranteed?",
                "{y}-year warranty",
                "What warranty does the blender have?",
                "Appliances are guaranteed to ship before the holiday if ordered today.",
            ),
            F(
                "Payment was taken by credit card ending in {digits:4471|1029}.",
                "What did I settle this purchase with?",
                "credit card",
                None,
                "Purchase methods for the team budget are explained in the finance guide.",
            ),
        ),
    ),
    Topic(
        "utilities",
        "Statement for customer {num}",
        (
            "Your supplier is {company}.",
            "This statement covers the period ending {date}.",
            "Meter readings were estimated this time.",
            "Choose e-billing to save paper.",
        ),
        (
            F(
                "Your monthly instalment rises to {amount:85|110|140} euros from next month.",
                "How much will my regular power payment be?",
                "{amount} euros",
                "What is the new monthly instalment for customer {num}?",
                "Regular power cuts are announced a week in advance.",
            ),
            F(
                "The tariff is {rate:0.28|0.31} euros per kilowatt hour, fixed for a year.",
                "What price do I pay for each unit of electricity?",
                "{rate} euros",
                "What is the tariff per kilowatt hour?",
                "Electricity unit prices in other countries are compared on our blog.",
            ),
            F(
                "A power cut is reported to the grid operator, not to us.",
                "Who do I call when the lights go out?",
                "grid operator",
                None,
                "Call the caretaker when the lights in the hallway need new bulbs.",
            ),
            F(
                "Solar panel owners are paid {rate:0.08|0.10} euros for each kWh sent back to "
                "the grid.",
                "What do I earn for the energy my roof produces?",
                "{rate} euros",
                None,
                "Roof repairs that produce leaks are covered by the landlord.",
            ),
            F(
                "Your annual settlement showed a credit of {amount:64|120} euros, refunded to "
                "your bank account.",
                "Did I overpay last year and get something back?",
                "credit of {amount} euros",
                None,
                "Something went back to the warehouse last year by mistake.",
            ),
            F(
                "The contract can be ended with one month's notice at no cost.",
                "Am I free to switch providers without a penalty?",
                "one month",
                None,
                "Penalty points for late meter readings are not used by providers.",
            ),
        ),
    ),
    Topic(
        "wedding",
        "Wedding plan {num}: {person} and {person2}",
        (
            "The couple met in {city}.",
            "Everyone is asked to confirm by {date}.",
            "The planner is {company} Events.",
            "Photos will be shared online afterwards.",
        ),
        (
            F(
                "The ceremony starts at {time:14:00|15:30} at the old town hall.",
                "What time should guests be seated for the vows?",
                "{time}",
                "When does the ceremony start?",
                "Seated guests may take photos during the vows if the flash is off.",
            ),
            F(
                "The dress code is black tie.",
                "What should I wear to the celebration?",
                "black tie",
                "What is the dress code?",
                "Wear comfortable shoes for the celebration walk through the park.",
            ),
            F(
                "The reception dinner is at the Riverside restaurant, with a vegetarian menu "
                "available.",
                "Is there a meat-free option at the meal?",
                "vegetarian",
                None,
                "Free options for the meal kits are limited this month.",
            ),
            F(
                "Please do not bring gifts; a donation to the animal shelter is welcome instead.",
                "What present would the pair like?",
                "donation",
                None,
                "Present ideas for the office party are collected by {person}.",
            ),
            F(
                "Children are welcome; a babysitter will be available in a separate room.",
                "Can we bring our kids?",
                "babysitter",
                None,
                "Kids' bikes should not be brought into the hall.",
            ),
            F(
                "Free parking is available behind the venue for {n:40|60} cars.",
                "Where can we leave the vehicle?",
                "parking",
                None,
                "Leave the vehicle keys at the reception if you take a taxi home.",
            ),
        ),
    ),
    Topic(
        "gym",
        "Membership terms {num}, {company} Fitness",
        (
            "Open from 6 am to 10 pm.",
            "Lockers are free for members.",
            "Joined on {date}.",
            "Classes can be booked in the app.",
        ),
        (
            F(
                "The membership fee is {amount:29|39|49} euros per month, charged on the 1st.",
                "What do I pay to work out there?",
                "{amount} euros",
                "What is the membership fee at {company} Fitness?",
                "Pay for personal trainers who work evenings is discussed in the staff meeting.",
            ),
            F(
                "Yoga classes run on {weekday} and Thursday evenings at {time:18:30|19:00}.",
                "When can I do stretching and breathing sessions?",
                "{time}",
                "When are the yoga classes?",
                "Breathing exercises are explained in the sessions leaflet at reception.",
            ),
            F(
                "Members may bring a guest {n:twice|once} a month for free.",
                "Can a friend come along with me?",
                "guest",
                None,
                "Come along to the friend-of-the-club barbecue in June.",
            ),
            F(
                "A personal trainer session costs {amount:35|45} euros for 45 minutes.",
                "What's the price of one-on-one coaching?",
                "{amount} euros",
                None,
                "Coaching prices for the youth football team are on the club website.",
            ),
            F(
                "Membership can be frozen for up to {m:2|3} months for illness or travel.",
                "Can I pause my subscription while I'm injured?",
                "frozen",
                None,
                "Injured players pause training for two weeks at least.",
            ),
            F(
                "Towels are provided at the front desk; please bring your own padlock.",
                "Do I need to take something to secure my belongings?",
                "padlock",
                None,
                "Belongings left after closing are taken to lost property.",
            ),
        ),
    ),
    Topic(
        "taxes",
        "Tax return notes {num}",
        (
            "Prepared with help from {person}.",
            "Receipts are in the blue folder.",
            "Reminders set for {date}.",
            "Copies stored on the shared drive.",
        ),
        (
            F(
                "The filing deadline is {by:1 May|30 April} for paper returns.",
                "By when must the forms reach the revenue office?",
                "{by}",
                "What is the filing deadline for paper returns?",
                "Forms for the office move must reach facilities by Friday.",
            ),
            F(
                "Home office costs can be deducted up to {amount:1,260|1,500} euros a year.",
                "How much can I write off for working from my house?",
                "{amount} euros",
                "How much of home office costs can be deducted?",
                "Write-offs for old house furniture are listed in the inventory.",
            ),
            F(
                "Charity donations above {amount:50|100} euros need a receipt from the charity.",
                "Do gifts to good causes reduce what I owe?",
                "receipt",
                None,
                "Good causes supported by the company are chosen by staff vote.",
            ),
            F(
                "The refund of {amount:830|1,240} euros is expected in {month:June|July}.",
                "How much money will come back to me, and when?",
                "{amount} euros",
                None,
                "Money for the coffee fund will come back to the team at year end.",
            ),
            F(
                "Commuting allowance is {rate:0.30|0.38} euros per kilometre one way.",
                "What's the rate for driving to work?",
                "{rate} euros",
                None,
                "Driving to work in snow: the rate of accidents doubles.",
            ),
            F(
                "Both spouses file jointly, which lowers the combined rate.",
                "Should my husband and I submit together?",
                "jointly",
                None,
                "Husband and wife teams submit together for the quiz night.",
            ),
        ),
    ),
    Topic(
        "meetings",
        "Minutes {num}: {team} team",
        (
            "Present: {person}, {person2} and three others.",
            "The meeting started ten minutes late.",
            "Minutes taken by {person}.",
            "The next meeting is on {date}.",
        ),
        (
            F(
                "Decision: the launch moves to {date2}.",
                "When are we going live now?",
                "{date2}",
                "When is the launch now, per minutes {num}?",
                "Now that the live chat is going, support hours change.",
            ),
            F(
                "{person3} will draft the budget by {weekday}.",
                "Who is writing up the financial plan?",
                "{person3}",
                "Who will draft the {team} budget?",
                "Writing the financial plan template took longer than expected last year.",
            ),
            F(
                "The team agreed to hold stand-ups at {time:09:15|09:45} instead of 10:00.",
                "What time is the daily sync?",
                "{time}",
                None,
                "Sync problems with the shared calendar were raised again.",
            ),
            F(
                "The budget for the campaign was cut by {pct:10|15|20} percent.",
                "How much less money do we have for the promotion?",
                "{pct} percent",
                None,
                "Promotion rounds for staff happen twice a year; less paperwork this time.",
            ),
            F(
                "Hiring a second designer was postponed until the autumn.",
                "Are we recruiting another creative person soon?",
                "postponed",
                None,
                "Creative people soon get bored of recruiting fairs, according to the survey.",
            ),
            F(
                "Open risk: the supplier in {city} may miss the delivery of the components.",
                "What might hold up the project?",
                "supplier",
                None,
                "Hold the project kick-off room for two hours on Monday.",
            ),
        ),
    ),
    Topic(
        "support",
        "Support ticket {num}",
        (
            "Customer: {person}.",
            "Channel: email.",
            "Opened on {date}.",
            "Priority: normal.",
        ),
        (
            F(
                "The customer received a cracked screen on the tablet and asked for a replacement.",
                "What was wrong with the device when it arrived?",
                "cracked screen",
                "What did the customer in ticket {num} receive?",
                "Devices that arrived wrong-sized were sent back in bulk.",
            ),
            F(
                "A refund of {amount:129|249} euros was issued on {date2}.",
                "Did we give the buyer their money back?",
                "refund",
                "Was a refund issued for ticket {num}?",
                "Buyers who want their money back should fill in the form online.",
            ),
            F(
                "Escalated to {person3}, team lead, because the client threatened legal action.",
                "Why was this passed to a manager?",
                "legal action",
                None,
                "A manager passed by the support desk to say thanks.",
            ),
            F(
                "The issue was solved by resetting the router to factory settings.",
                "How did we fix the connection problem?",
                "router",
                None,
                "Connection problems in the meeting room fix themselves after a while.",
            ),
            F(
                "Satisfaction score after closing: {n:4|5} out of 5.",
                "How happy was the person with our help?",
                "out of 5",
                None,
                "Happy hour for the help desk team is on Friday.",
            ),
            F(
                "The customer prefers to be contacted by phone after 5 pm.",
                "What's the best way and time to reach them?",
                "phone",
                None,
                "The best way to reach the office by car is the ring road.",
            ),
        ),
    ),
    Topic(
        "product",
        "Product sheet: SoundBox {num}",
        (
            "Available in black and white.",
            "Made by {company}.",
            "Launched on {date}.",
            "See the manual for safety information.",
        ),
        (
            F(
                "Battery life is up to {h:12|18|24} hours at medium volume.",
                "How long does it play before it needs charging?",
                "{h} hours",
                "What is the battery life of the SoundBox {num}?",
                "Charging cables for play consoles are sold separately.",
            ),
            F(
                "It is waterproof to IP{ip:67|65}, so it survives rain and splashes.",
                "Can I use it by the pool?",
                "IP{ip}",
                "Is the SoundBox {num} waterproof?",
                "Pool use is restricted to hotel guests.",
            ),
            F(
                "It weighs {g:540|780} grams.",
                "How heavy is it?",
                "{g} grams",
                None,
                "Heavy items ship in two boxes.",
            ),
            F(
                "Two units can be paired for stereo sound via Bluetooth 5.3.",
                "Can I connect a second one for left and right audio?",
                "stereo",
                None,
                "Audio cables left and right of the desk should be tidied.",
            ),
            F(
                "Charging at full speed takes {min:90|120} minutes with a USB-C cable.",
                "How quickly does it top up?",
                "{min} minutes",
                None,
                "Top sellers this quarter include the quickly assembled desk.",
            ),
            F(
                "The box includes a carrying strap and a USB-C cable, but no wall adapter.",
                "Is a plug for the socket supplied?",
                "wall adapter",
                None,
                "Socket covers are supplied to families with small children.",
            ),
        ),
    ),
    Topic(
        "library",
        "Library notice for member {num}",
        (
            "The library is at the {city} civic centre.",
            "Opening hours change in summer.",
            "Sent on {date}.",
            "Thank you for reading with us.",
        ),
        (
            F(
                "Books can be borrowed for {w:three|four} weeks and renewed twice online.",
                "How long may I keep a novel?",
                "{w} weeks",
                "How long can books be borrowed?",
                "Keep quiet in the novel-reading corner, please.",
            ),
            F(
                "Late returns cost {amount:0.20|0.25} euros per item per day.",
                "What's the fine for bringing things back overdue?",
                "{amount} euros",
                "What do late returns cost?",
                "Fine art books are kept in the back room.",
            ),
            F(
                "Up to {n:10|15} items can be on loan at the same time.",
                "What's the maximum number of titles I can take home at once?",
                "{n} items",
                None,
                "Take home a free bookmark with the titles of this month's reading list.",
            ),
            F(
                "Study rooms are booked at the front desk, for up to {h:2|3} hours.",
                "How do I reserve a quiet space to work?",
                "front desk",
                None,
                "Quiet space for prayer is on the second floor; no need to reserve.",
            ),
            F(
                "Printing costs {c:10|15} cents a page in black and white.",
                "How much to make copies?",
                "{c} cents",
                None,
                "Make copies of your ID before travelling abroad.",
            ),
            F(
                "E-books are available through the Libby app with your card number.",
                "Can I read digital titles on my phone?",
                "Libby",
                None,
                "Digital phone lines in the building were replaced.",
            ),
        ),
    ),
    Topic(
        "facilities",
        "Facilities update {num}: {city} office",
        (
            "The office has four floors and a roof terrace.",
            "Visitors sign in at reception.",
            "Posted on {date}.",
            "Send ideas to the facilities team.",
        ),
        (
            F(
                "The canteen serves hot lunches between 12:00 and 14:00.",
                "When can I get a warm meal at work?",
                "canteen",
                "When does the canteen serve hot lunches?",
                "Warm meals at work events are ordered by the social committee.",
            ),
            F(
                "Bikes are stored in the basement; the door code changes monthly.",
                "Where do I park my bicycle?",
                "basement",
                "Where are bikes stored at the {city} office?",
                "Park benches near the bicycle path were painted.",
            ),
            F(
                "The air conditioning is switched off at {time:19:00|20:00} on weekdays.",
                "When does the cooling stop in the evening?",
                "{time}",
                None,
                "Evening events stop at ten because of the neighbours; cooling drinks provided.",
            ),
            F(
                "The large meeting room on floor {n:2|3} seats {s:12|14} people and has a "
                "projector.",
                "Where can a dozen colleagues get together?",
                "meeting room",
                None,
                "Colleagues get together for the quiz every last Friday.",
            ),
            F(
                "Lost property is kept at reception for {w:two|four} weeks.",
                "Where do I find things I left behind?",
                "reception",
                None,
                "Things left behind by the movers are listed in the inventory.",
            ),
            F(
                "Fire drills take place on the first {weekday} of each quarter.",
                "When is the evacuation practice?",
                "first {weekday}",
                None,
                "Evacuation routes for practice days are printed on the wall.",
            ),
        ),
    ),
)

# ---- slot values ---------------------------------------------------------------------------

_FIRST = str.split(
    "Ana Maria Tomas Sofia Lukas Emma Noah Lea Jonas Mila Pieter Ines Omar Yara Felix Nora "
    "Hugo Clara Ivan Rosa Karim Elif Marco Julia Aditya Freya Mateo Hanna Viktor Alba"
)
_LAST = str.split(
    "Jensen Moreau Kowalski Silva Novak Fischer Rossi Haddad Lindqvist Okafor Brandt Costa "
    "Varga Janssen Petrov Duarte Keller Nakamura Ortiz Weber Horvat Dubois Berg Kaya"
)
_COMPANIES = str.split(
    "Veltrix Brandmoor Quellon Arvada Solvik Tarnell Oberline Kestrix Maravel Dunholt Pexton "
    "Corvana Halvard Zentrop Ilmaro Westgale Norvik Fenwray Ostrel Lumbard Caverin Trelloway"
)
_CITIES = str.split(
    "Lisbon Ghent Porto Lyon Krakow Turin Bergen Utrecht Leipzig Valencia Graz Aarhus Bilbao "
    "Brno Tallinn Malmo Basel Cork Split Bordeaux"
)
_STREETS = str.split(
    "Elm Lane,Harbour Road,Mill Street,Station Square,Orchard Way,Canal Walk,Kings Avenue,"
    "Bridge Street,Quarry Row,Linden Close",
    ",",
)
_MONTHS = str.split(
    "January February March April May June July August September October November December"
)
_WEEKDAYS = str.split("Monday Tuesday Wednesday Thursday Friday")
_DISHES = str.split(
    "apple tart,lentil stew,cheese scones,fish pie,banana bread,vegetable lasagne,"
    "plum crumble,chicken curry,onion quiche,carrot cake",
    ",",
)
_CARS = str.split("Skoda Octavia,Renault Clio,Toyota Corolla,Ford Focus,Volvo V60,Fiat Panda", ",")
_PETS = str.split("Biscuit,Luna,Pepper,Otto,Maple,Ziggy,Bruno,Nala", ",")
_SCHOOLS = str.split("Riverside,Hillcrest,Oakfield,Meadowbank,Northgate", ",")
_TEAMS = str.split("platform,marketing,sales,design,finance,support", ",")

_SLOT = re.compile(r"\{(\w+)(?::([^}]*))?\}")


class Slots:
    """The values of one document's slots: each drawn once, then repeated."""

    def __init__(self, rng: random.Random, numbers: Iterator[int]) -> None:
        self.rng = rng
        self.numbers = numbers
        self.values: dict[str, str] = {}

    def fill(self, template: str) -> str:
        return _SLOT.sub(lambda m: self.value(m.group(1), m.group(2)), template)

    def value(self, name: str, options: str | None) -> str:
        if name not in self.values:
            self.values[name] = self._draw(name, options)
        return self.values[name]

    def _draw(self, name: str, options: str | None) -> str:
        rng = self.rng
        if options is not None:
            return rng.choice(options.split("|"))
        base = name.rstrip("0123456789")
        if base == "person":
            return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
        if base == "date":
            return f"{rng.randint(1, 28)} {rng.choice(_MONTHS)}"
        if name == "num":
            return str(next(self.numbers))  # unique in the corpus: direct questions name it
        if name == "num2":
            return str(rng.randint(1000, 9999))
        pools = {
            "company": _COMPANIES,
            "city": _CITIES,
            "street": _STREETS,
            "weekday": _WEEKDAYS,
            "dish": _DISHES,
            "car": _CARS,
            "pet": _PETS,
            "school": _SCHOOLS,
            "team": _TEAMS,
        }
        if base not in pools:
            raise KeyError(f"no values for the slot {{{name}}}")
        used = {self.values[k] for k in self.values if k.rstrip("0123456789") == base}
        return rng.choice([v for v in pools[base] if v not in used] or pools[base])


# ---- content words -------------------------------------------------------------------------

#: English function words (NLTK's list, modal verbs and quantifiers added; no content word).
STOP_WORDS = frozenset(
    str.split(
        """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom
    this that these those am is are was were be been being have has had having do does did
    doing a an the and but if or because as until while of at by for with about against
    between into through during before after above below to from up down in out on off over
    under again further then once here there when where why how all any both each few more
    most other some such no nor not only own same so than too very s t can will just don
    should now d ll m o re ve y ain must may might would could shall ought much many
    """
    )
)


def normalise(word: str) -> str:
    """Lower-cased, a plural's ending stripped (stemming-ish: 'invoices' -> 'invoice')."""
    word = word.lower()
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "ches", "shes", "xes", "zes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def content_words(text: str) -> frozenset[str]:
    words = (normalise(w) for w in re.findall(r"[a-z0-9]+", text.lower()))
    return frozenset(w for w in words if w not in STOP_WORDS)


def shared_words(question: str, passage: str, *, strict: bool = False) -> frozenset[str]:
    """The question's content words found in the passage. Strict also counts a word that is
    a prefix of the other (3 letters or more: 'pay'/'payment') or shares its first five
    letters ('monthly'/'months'): a cruder stemmer's view."""
    mine, theirs = content_words(question), content_words(passage)
    if not strict:
        return mine & theirs
    return frozenset(w for w in mine if any(_alike(w, o) for o in theirs))


def _alike(a: str, b: str) -> bool:
    if a == b:
        return True
    if a.isdigit() or b.isdigit():
        return False
    short, long_ = sorted((a, b), key=len)
    return (len(short) >= 3 and long_.startswith(short)) or (len(short) >= 5 and a[:5] == b[:5])


# ---- (a) the retrieval-quality corpus ------------------------------------------------------

Role = Literal["answer", "distractor", "filler"]
Kind = Literal["paraphrase", "direct"]


@dataclass(frozen=True)
class Doc:
    name: str  # file name, e.g. "doc-0042.md" (says nothing of its role)
    title: str
    body: str
    topic: str
    role: Role
    fact: int | None = None  # the fact it answers (answer) or is the trap of (distractor)

    @property
    def text(self) -> str:
        return f"# {self.title}\n\n{self.body}\n"


@dataclass(frozen=True)
class Question:
    text: str
    kind: Kind
    answer: str  # the answer document's name
    key: str  # what the answer passage holds
    topic: str
    fact: int  # the fact's index in its topic
    shared: frozenset[str]  # content words shared with the answer document
    shared_strict: frozenset[str]


@dataclass(frozen=True)
class QualityCorpus:
    docs: tuple[Doc, ...]
    questions: tuple[Question, ...]

    def doc(self, name: str) -> Doc:
        return next(d for d in self.docs if d.name == name)

    def no_overlap(self, *, strict: bool = False) -> float:
        """The fraction of questions sharing no content word with their answer document."""
        shared = [q.shared_strict if strict else q.shared for q in self.questions]
        return sum(not s for s in shared) / len(shared)


#: Documents holding only a topic's filler, per topic (more same-topic text to rank).
FILLER_DOCS = 2


def quality_corpus(seed: int = SEED) -> QualityCorpus:
    """Per topic: one answer document per fact, one distractor document per fact (its trap
    and filler) and FILLER_DOCS of filler only; shuffled and named neutrally."""
    rng = random.Random(seed)
    numbers = iter(rng.sample(range(1000, 9999), 2000))
    drafts: list[tuple[Doc, list[tuple[Fact, int, Slots]]]] = []
    for topic in TOPICS:
        for index, fact in enumerate(topic.facts):
            slots = Slots(rng, numbers)
            answer = replace(_answer_doc(topic, fact, slots, rng), fact=index)
            drafts.append((answer, [(fact, index, slots)]))
        for index, fact in enumerate(topic.facts):
            trap = _other_doc(topic, fact.trap, Slots(rng, numbers), rng)
            drafts.append((replace(trap, fact=index), []))
        for _ in range(FILLER_DOCS):
            drafts.append((_other_doc(topic, None, Slots(rng, numbers), rng), []))
    rng.shuffle(drafts)
    docs: list[Doc] = []
    questions: list[Question] = []
    for n, (draft, facts) in enumerate(drafts, 1):
        suffix = ".md" if n % 3 else ".txt"
        doc = replace(draft, name=f"doc-{n:04d}{suffix}")
        docs.append(doc)
        for fact, index, slots in facts:
            questions.extend(_questions(doc, fact, index, slots))
    _check(questions, docs)
    return QualityCorpus(tuple(docs), tuple(questions))


def _answer_doc(topic: Topic, fact: Fact, slots: Slots, rng: random.Random) -> Doc:
    """The fact among two or three of the topic's fillers, none of which shares a word with
    the fact's paraphrase question (by the strict test)."""
    title = slots.fill(topic.title)
    passage = slots.fill(fact.passage)
    question = slots.fill(fact.question)
    fillers = [slots.fill(f) for f in rng.sample(topic.fillers, len(topic.fillers))]
    fitting = [f for f in fillers if not shared_words(question, f, strict=True)]
    chosen = fitting[: rng.randint(2, 3)]
    chosen.insert(rng.randint(0, len(chosen)), passage)
    return Doc("", title, " ".join(chosen), topic.name, "answer")


def _other_doc(topic: Topic, trap: str | None, slots: Slots, rng: random.Random) -> Doc:
    title = slots.fill(topic.title)
    sentences = [slots.fill(f) for f in rng.sample(topic.fillers, 3)]
    if trap is not None:
        sentences.insert(rng.randint(0, len(sentences)), slots.fill(trap))
    role: Role = "distractor" if trap is not None else "filler"
    return Doc("", title, " ".join(sentences), topic.name, role)


def _questions(doc: Doc, fact: Fact, index: int, slots: Slots) -> list[Question]:
    asked: list[tuple[str, Kind]] = [(slots.fill(fact.question), "paraphrase")]
    if fact.direct is not None:
        asked.append((slots.fill(fact.direct), "direct"))
    key = slots.fill(fact.key)
    return [
        Question(
            text,
            kind,
            doc.name,
            key,
            doc.topic,
            index,
            shared_words(text, doc.text),
            shared_words(text, doc.text, strict=True),
        )
        for text, kind in asked
    ]


def _check(questions: Sequence[Question], docs: Sequence[Doc]) -> None:
    """The properties the benchmark relies on: every paraphrase shares no content word with
    its answer; every key is in its answer; half the questions or more share nothing."""
    by_name = {d.name: d for d in docs}
    wrong = [
        f"{q.topic} {q.fact}: {q.text!r} shares {sorted(q.shared)}"
        for q in questions
        if q.kind == "paraphrase" and q.shared
    ]
    wrong += [
        f"{q.topic} {q.fact}: key {q.key!r} not in its answer"
        for q in questions
        if q.key.lower() not in by_name[q.answer].text.lower()
    ]
    if wrong:
        raise AssertionError("the question set is not as designed:\n" + "\n".join(wrong))
    share = sum(not q.shared for q in questions) / len(questions)
    if share < 0.5:
        raise AssertionError(f"only {share:.0%} of the questions share no content word")


def write_quality_corpus(corpus: QualityCorpus, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for doc in corpus.docs:
        (folder / doc.name).write_text(doc.text, "utf-8")
    return folder


# ---- (b) the indexing corpus: 1,000 mixed documents -----------------------------------------

#: (extension, documents, MB on disk): ~200 MB in all.
MIX: tuple[tuple[str, int, float], ...] = (
    (".txt", 250, 62.0),
    (".md", 200, 40.0),
    (".html", 150, 36.0),
    (".pdf", 150, 30.0),
    (".docx", 100, 14.0),
    (".xlsx", 80, 14.0),
    (".pptx", 70, 4.0),
)
#: Bytes on disk per character of text, by format (measured on this generator's output).
_BYTES_PER_CHAR = {
    ".txt": 1.05,
    ".md": 1.09,
    ".html": 1.08,
    ".pdf": 0.57,
    ".docx": 0.37,
    ".xlsx": 0.60,
    ".pptx": 1.1,
}
#: What a PowerPoint file weighs with no slides (its template).
_PPTX_BASE = 28_000


class TextSource:
    """Plausible running text, fast: sentences drawn from the topics' sentences (their slots
    filled) and from a Zipf-distributed vocabulary of English and made-up words."""

    def __init__(self, seed: int = SEED, pool: int = 40_000) -> None:
        self.rng = random.Random(seed)
        rng = self.rng
        numbers = iter(range(10_000, 10_000_000))
        templates = [
            t for topic in TOPICS for t in (*topic.fillers, *(f.passage for f in topic.facts))
        ] + [f.trap for topic in TOPICS for f in topic.facts]
        english = sorted({w for t in templates for w in re.findall(r"[a-z]{3,}", t.lower())})
        made_up = {_made_up_word(rng) for _ in range(12_000)}
        vocabulary = english + sorted(made_up)
        rng.shuffle(vocabulary)
        cumulative = list(
            itertools.accumulate(1 / (rank + 1) ** 1.07 for rank in range(len(vocabulary)))
        )
        sentences = [Slots(rng, numbers).fill(rng.choice(templates)) for _ in range(pool // 4)]
        while len(sentences) < pool:
            words = rng.choices(vocabulary, cum_weights=cumulative, k=rng.randint(6, 22))
            sentences.append(" ".join(words).capitalize() + rng.choice(".......?!;"))
        self.sentences = sentences

    def paragraph(self, rng: random.Random, sentences: int | None = None) -> str:
        count = sentences if sentences is not None else rng.randint(3, 8)
        return " ".join(rng.choices(self.sentences, k=count))

    def text(self, rng: random.Random, chars: int) -> list[str]:
        """Paragraphs adding up to about `chars` characters."""
        out: list[str] = []
        total = 0
        while total < chars:
            out.append(self.paragraph(rng))
            total += len(out[-1]) + 2
        return out

    def heading(self, rng: random.Random) -> str:
        return " ".join(rng.choice(self.sentences).split()[:4]).rstrip(".?!;").title()


def _made_up_word(rng: random.Random) -> str:
    syllables = ("ka", "lo", "ri", "mu", "ten", "sa", "vor", "el", "di", "pan", "ost", "re")
    return "".join(rng.choices(syllables, k=rng.randint(2, 4)))


@dataclass(frozen=True)
class MixedFile:
    path: Path
    kind: str  # its extension
    size: int  # bytes on disk


def write_mixed_corpus(
    folder: Path, *, scale: float = 1.0, seed: int = SEED, source: TextSource | None = None
) -> list[MixedFile]:
    """1,000 documents of the MIX (times `scale`, for a quick run) under `folder`, in ten
    subfolders; sizes spread log-normally around each format's mean."""
    rng = random.Random(seed + 1)
    source = source or TextSource(seed)
    written: list[MixedFile] = []
    n = 0
    for ext, count, megabytes in MIX:
        count = max(1, round(count * scale))
        sizes = _sizes(rng, count, megabytes * scale * 1024 * 1024)
        for size in sizes:
            n += 1
            path = folder / f"part-{n % 10}" / f"{_file_stem(rng)}-{n:04d}{ext}"
            path.parent.mkdir(parents=True, exist_ok=True)
            chars = max(400, int(size / _BYTES_PER_CHAR[ext]))
            if ext == ".pptx":
                chars = max(400, int((size - _PPTX_BASE) / _BYTES_PER_CHAR[ext]))
            WRITERS[ext](path, source, random.Random(rng.random()), chars)
            written.append(MixedFile(path, ext, path.stat().st_size))
    return written


#: Bumped whenever the mixed corpus's generator changes (a cached copy is then remade).
MIXED_VERSION = 2


def mixed_corpus(
    *, scale: float = 1.0, seed: int = SEED, fresh: bool = False
) -> tuple[Path, list[MixedFile]]:
    """The mixed corpus in the temp folder, generated once and reused by later runs (it
    takes a minute or two): its documents' folder and files. The list of files is kept
    beside that folder, not in it, so it is never indexed."""
    base = Path(tempfile.gettempdir()) / f"deskhand-knowledge-mixed-v{MIXED_VERSION}-{seed}"
    base = base.with_name(f"{base.name}-{scale:g}")
    docs, manifest = base / "docs", base / "manifest.json"
    if not fresh and manifest.exists():
        listed = json.loads(manifest.read_text("utf-8"))
        files = [MixedFile(docs / name, kind, size) for name, kind, size in listed]
        if all(f.path.is_file() and f.path.stat().st_size == f.size for f in files):
            return docs, files
    if base.exists():
        shutil.rmtree(base)
    files = write_mixed_corpus(docs, scale=scale, seed=seed)
    listed = [[str(f.path.relative_to(docs)), f.kind, f.size] for f in files]
    manifest.write_text(json.dumps(listed), "utf-8")
    return docs, files


def _sizes(rng: random.Random, count: int, total: float) -> list[float]:
    raw = [rng.lognormvariate(0.0, 0.9) for _ in range(count)]
    scale = total / sum(raw)
    return [r * scale for r in raw]


def _file_stem(rng: random.Random) -> str:
    return rng.choice(
        ("report", "notes", "minutes", "invoice", "plan", "summary", "memo", "review", "log")
    )


def _write_txt(path: Path, source: TextSource, rng: random.Random, chars: int) -> None:
    path.write_text("\n\n".join(source.text(rng, chars)) + "\n", "utf-8")


def _write_md(path: Path, source: TextSource, rng: random.Random, chars: int) -> None:
    parts = [f"# {source.heading(rng)}"]
    for i, para in enumerate(source.text(rng, chars)):
        if i % 6 == 5:
            parts.append(f"## {source.heading(rng)}")
        if i % 11 == 10:
            rows = [f"| {rng.randint(1, 999)} | {source.heading(rng)} |" for _ in range(4)]
            parts.append("| id | item |\n|---|---|\n" + "\n".join(rows))
        parts.append(para)
    path.write_text("\n\n".join(parts) + "\n", "utf-8")


def _write_html(path: Path, source: TextSource, rng: random.Random, chars: int) -> None:
    title = html.escape(source.heading(rng))
    parts = [f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>"]
    for i, para in enumerate(source.text(rng, chars)):
        if i % 6 == 5:
            parts.append(f"<h2>{html.escape(source.heading(rng))}</h2>")
        parts.append(f"<p>{html.escape(para)}</p>")
    parts.append("</body></html>")
    path.write_text("\n".join(parts), "utf-8")


def _write_pdf(path: Path, source: TextSource, rng: random.Random, chars: int) -> None:
    """Text lines placed with `text()` (pre-wrapped): fpdf2's own wrapping is ~50x slower."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_creation_date(datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC))
    pdf.set_compression(True)
    pdf.set_font("helvetica", size=10)
    lines: list[str] = []
    for para in source.text(rng, chars):
        lines.extend(textwrap.wrap(para, 95))
        lines.append("")
    per_page = 54
    for start in range(0, len(lines), per_page):
        pdf.add_page()
        for row, line in enumerate(lines[start : start + per_page]):
            if line:
                pdf.text(12, 14 + row * 5, line)
    pdf.output(str(path))


def _write_docx(path: Path, source: TextSource, rng: random.Random, chars: int) -> None:
    import docx

    document = docx.Document()
    document.add_heading(source.heading(rng), level=1)
    for i, para in enumerate(source.text(rng, chars)):
        if i % 8 == 7:
            document.add_heading(source.heading(rng), level=2)
        document.add_paragraph(para)
    document.save(str(path))


def _write_xlsx(path: Path, source: TextSource, rng: random.Random, chars: int) -> None:
    import openpyxl

    book = openpyxl.Workbook(write_only=True)
    # Under the reader's 10,000 rows a sheet (a row is ~80 characters).
    sheets = max(rng.randint(1, 3), -(-chars // 700_000))
    per_sheet = max(200, chars // sheets)
    for s in range(sheets):
        name = re.sub(r"[^A-Za-z0-9 ]", "", source.heading(rng))[:18]
        sheet = book.create_sheet(f"Sheet {s + 1} {name}")
        sheet.append(["id", "item", "amount", "note", "count"])
        written = 0
        row = 0
        while written < per_sheet:
            row += 1
            note = " ".join(rng.choice(source.sentences).split()[:10])
            item = source.heading(rng)
            sheet.append([row, item, round(rng.random() * 10_000, 2), note, rng.randint(1, 500)])
            written += len(note) + len(item) + 16
    book.save(str(path))


def _write_pptx(path: Path, source: TextSource, rng: random.Random, chars: int) -> None:
    import pptx

    deck = pptx.Presentation()
    layout = deck.slide_layouts[1]
    written = 0
    while written < chars:
        slide = deck.slides.add_slide(layout)
        slide.shapes.title.text = source.heading(rng)
        body = slide.placeholders[1].text_frame
        body.text = source.paragraph(rng, 4)
        for _ in range(rng.randint(3, 6)):
            body.add_paragraph().text = source.paragraph(rng, 2)
        written += sum(len(p.text) for p in body.paragraphs) + 40
    deck.save(str(path))


WRITERS = {
    ".txt": _write_txt,
    ".md": _write_md,
    ".html": _write_html,
    ".pdf": _write_pdf,
    ".docx": _write_docx,
    ".xlsx": _write_xlsx,
    ".pptx": _write_pptx,
}


def chunk_texts(count: int, *, size: int = 1000, seed: int = SEED) -> Iterator[str]:
    """`count` texts of about `size` characters (an index's chunks), generated lazily."""
    source = TextSource(seed, pool=20_000)
    rng = random.Random(seed + 2)
    for _ in range(count):
        parts: list[str] = []
        total = 0
        while total < size:
            parts.append(rng.choice(source.sentences))
            total += len(parts[-1]) + 1
        yield " ".join(parts)


# ---- the report ----------------------------------------------------------------------------


def describe(corpus: QualityCorpus) -> list[str]:
    roles = {r: sum(d.role == r for d in corpus.docs) for r in ("answer", "distractor", "filler")}
    kinds = {k: sum(q.kind == k for q in corpus.questions) for k in ("paraphrase", "direct")}
    return [
        f"retrieval corpus: {len(corpus.docs)} documents over {len(TOPICS)} topics "
        f"({roles['answer']} answer, {roles['distractor']} distractor, {roles['filler']} "
        f"filler only)",
        f"questions: {len(corpus.questions)} ({kinds['paraphrase']} paraphrase, "
        f"{kinds['direct']} direct)",
        f"sharing no content word with their answer document: "
        f"{corpus.no_overlap():.1%} (lower-cased, plurals stripped, stop words removed); "
        f"{corpus.no_overlap(strict=True):.1%} by the strict prefix test",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mixed", action="store_true", help="also make the mixed documents")
    parser.add_argument("--scale", type=float, default=1.0, help="of the mixed corpus")
    parser.add_argument("--fresh", action="store_true", help="remake a cached mixed corpus")
    parser.add_argument("--show", action="store_true", help="print every question")
    args = parser.parse_args()
    corpus = quality_corpus()
    print("\n".join(describe(corpus)))
    if args.show:
        for q in corpus.questions:
            shared = ",".join(sorted(q.shared_strict)) or "-"
            print(f"  [{q.kind[0]}] {q.text}  -> {q.answer} ({q.key}); strict shares: {shared}")
    if args.mixed:
        start = time.perf_counter()
        folder, files = mixed_corpus(scale=args.scale, fresh=args.fresh)
        total = sum(f.size for f in files)
        print(
            f"mixed corpus: {len(files)} files, {total / 1e6:.1f} MB in {folder} "
            f"({time.perf_counter() - start:.1f} s)"
        )
        for ext, _, _ in MIX:
            sizes = [f.size for f in files if f.kind == ext]
            print(
                f"  {ext:<6} {len(sizes):4d} files {sum(sizes) / 1e6:7.1f} MB "
                f"(largest {max(sizes) / 1e6:.2f} MB)"
            )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
